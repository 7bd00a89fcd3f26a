import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Page } from 'playwright-core';
import type {
  ControlResponseRecord,
  MediaSignalType,
  MediaTestApi,
  ServerPush,
} from '../media/browser/page-api.js';
import type { ChromiumHandle } from './chromium.js';

/**
 * The Node side of the media test page: bundles test/media/browser/page.ts (TypeScript source, esbuild, once per
 * process), serves it from 127.0.0.1 on a random port, and wraps each opened page so a test calls the page's API
 * (page-api.ts) as typed async methods. The page's origin is `server.origin`: register it as the Environment's origin.
 *
 *   const server = await MediaPageServer.start();
 *   const alice = await server.open(browser);
 *   await alice.api.connectControl(`ws://127.0.0.1:${port}/v1/plugins/media/control`, grant);
 *   await alice.api.join();
 *   await alice.api.publishMicrophone();
 *   const refusal = await bob.expectRefusal('produce', () => bob.api.publishMicrophone());
 */

// Compiled to dist/test/support/; the page's source stays in the repository (esbuild reads TypeScript).
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const PAGE_ENTRY = path.join(repoRoot, 'test', 'media', 'browser', 'page.ts');

const PAGE_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>media test page</title><script type="module" src="/page.js"></script></head>
<body></body></html>
`;

/** How long one page call may take; the page's own request and push timeouts are shorter. */
const CALL_TIMEOUT_MS = 30_000;

let bundle: Promise<string> | undefined;

/** The page's script, built on first use; minification off so page errors read as the source. */
export function pageBundle(): Promise<string> {
  return (bundle ??= build({
    entryPoints: [PAGE_ENTRY],
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'chrome120',
    minify: false,
    sourcemap: 'inline',
    write: false,
    logLevel: 'silent',
  }).then((result) => {
    const [output] = result.outputFiles;
    if (!output) throw new Error(`esbuild produced nothing for ${PAGE_ENTRY}`);
    return output.text;
  }));
}

/** Each API method as Playwright sees it: arguments and results are plain data, every call is async. */
export type RemoteApi<T> = {
  readonly [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : never;
};

/** Answers one media request of an exposed signal (the harness's stand-in for the control plane). */
export type SignalHandler = (type: MediaSignalType, payload: Readonly<Record<string, unknown>>) => Promise<unknown>;

type PushOf<T extends ServerPush['type']> = Extract<ServerPush, { type: T }>;

interface PageGlobals {
  readonly mediaTest: Readonly<Record<string, (...args: unknown[]) => unknown>>;
}

export class MediaPageServer {
  readonly #server: Server;
  readonly origin: string;
  readonly #pages = new Set<MediaPage>();

  private constructor(server: Server, origin: string) {
    this.#server = server;
    this.origin = origin;
  }

  static async start(): Promise<MediaPageServer> {
    const script = await pageBundle();
    const server = createServer((req, res) => {
      const [type, body] =
        req.url === '/' ? ['text/html; charset=utf-8', PAGE_HTML] : req.url === '/page.js' ? ['text/javascript; charset=utf-8', script] : [];
      if (!type) {
        // The browser asks for /favicon.ico on its own; a 404 would show up as a console error of the page.
        res.writeHead(req.url === '/favicon.ico' ? 204 : 404).end();
        return;
      }
      res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    return new MediaPageServer(server, `http://127.0.0.1:${port}`);
  }

  /** A new tab on the page: one participant, ready when this resolves. */
  async open(browser: ChromiumHandle): Promise<MediaPage> {
    const page = await browser.newPage();
    const media = new MediaPage(page);
    this.#pages.add(media);
    await page.goto(`${this.origin}/`);
    await page.waitForFunction(() => 'mediaTest' in globalThis);
    return media;
  }

  /** Closes the pages it opened and stops serving; the browser stays. */
  async close(): Promise<void> {
    await Promise.all([...this.#pages].map((p) => p.close()));
    this.#pages.clear();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

export class MediaPage {
  readonly page: Page;
  /** The page's API (page-api.ts), each call one `page.evaluate`. Rejections carry the page's error message. */
  readonly api: RemoteApi<Omit<MediaTestApi, 'nextPush'>>;
  readonly #errors: string[] = [];

  constructor(page: Page) {
    this.page = page;
    page.on('pageerror', (error) => this.#errors.push(`pageerror: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') this.#errors.push(`console: ${message.text()}`);
    });
    this.api = new Proxy({} as RemoteApi<Omit<MediaTestApi, 'nextPush'>>, {
      get: (_target, name) => (typeof name === 'string' ? (...args: unknown[]) => this.#call(name, args) : undefined),
    });
  }

  /** The first push of this type the test has not taken yet, waiting in the page up to `timeoutMs`. */
  nextPush<T extends ServerPush['type']>(type: T, timeoutMs = 10_000): Promise<PushOf<T>> {
    return this.#call('nextPush', [type, timeoutMs], timeoutMs + CALL_TIMEOUT_MS) as Promise<PushOf<T>>;
  }

  /** Media requests go to `handler` in Node (through `page.exposeFunction`) instead of the control socket. */
  async useSignal(handler: SignalHandler, name = 'testSignal'): Promise<void> {
    await this.page.exposeFunction(name, (type: MediaSignalType, payload: Readonly<Record<string, unknown>>) => handler(type, payload));
    await this.api.useExposedSignal(name);
  }

  /**
   * Runs an operation that must be refused by the server and returns the refusal: the last `ok: false` answer to a
   * request of `type`. Fails if the operation succeeds or fails without such an answer.
   */
  async expectRefusal(type: string, operation: () => Promise<unknown>): Promise<{ code: string; message: string }> {
    const before = (await this.api.responses()).length;
    const outcome = await operation().then(
      () => undefined,
      (error: unknown) => error,
    );
    if (outcome === undefined) throw new Error(`expected ${type} to be refused, but the operation succeeded`);
    const refused = (await this.api.responses())
      .slice(before)
      .filter((r): r is Extract<ControlResponseRecord, { ok: false }> => r.type === type && !r.ok)
      .at(-1);
    if (!refused) throw new Error(`expected a refused ${type}, but the operation failed otherwise: ${String(outcome)}`);
    return refused.error;
  }

  /** Uncaught page errors and console errors so far (a passing test can assert there are none). */
  errors(): readonly string[] {
    return this.#errors;
  }

  close(): Promise<void> {
    return this.page.close();
  }

  // page.evaluate has no timeout of its own: a call that never settles would hold the test until the runner kills it.
  async #call(name: string, args: readonly unknown[], timeoutMs = CALL_TIMEOUT_MS): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const call = this.page.evaluate(
      ({ name, args }) => {
        const method = (globalThis as unknown as PageGlobals).mediaTest[name];
        if (typeof method !== 'function') throw new Error(`the media test page has no ${name}()`);
        return method(...args);
      },
      { name, args },
    );
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`mediaTest.${name}() did not settle within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([call, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
