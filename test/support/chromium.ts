import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Headless Debian Chromium for the media tests (scripts/install-test-browser.sh installs it; Playwright's own browser
 * downloads cannot be fetched here). playwright-core drives it over CDP.
 */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * `--use-fake-ui-for-media-stream` accepts every capture prompt; with `--use-fake-device-for-media-stream` the
 * microphone is a generated beep and `getDisplayMedia` returns a fake 1280×720 monitor (`screen:…`), with no user
 * gesture and no picker, in headless Chromium 156. Loopback ICE candidates must be allowed (the SFU listens on
 * 127.0.0.1) and shown as addresses, not mDNS names. No QUIC, sync or background traffic: nothing leaves loopback.
 */
export const CHROMIUM_ARGS: readonly string[] = Object.freeze([
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  '--allow-loopback-in-peer-connection',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  '--autoplay-policy=no-user-gesture-required',
]);

export interface ChromiumHandle {
  readonly context: BrowserContext;
  newPage(): Promise<Page>;
  /** Closes the browser and removes its profile directory; later calls do nothing. */
  close(): Promise<void>;
}

/** One browser with a fresh profile; its pages share the profile (and so permissions and storage per origin). */
export async function launchChromium(extraArgs: readonly string[] = []): Promise<ChromiumHandle> {
  const profile = await mkdtemp(path.join(tmpdir(), 'registry-chromium-'));
  let context: BrowserContext;
  try {
    // A persistent context, because Playwright refuses --user-data-dir among the args.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: [...CHROMIUM_ARGS, ...extraArgs],
    });
  } catch (error) {
    await rm(profile, { recursive: true, force: true });
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    context,
    newPage: () => context.newPage(),
    // Chromium's helper processes may still be writing the profile for a moment after the browser exits.
    close: () =>
      (closing ??= context.close().finally(() => rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }))),
  };
}
