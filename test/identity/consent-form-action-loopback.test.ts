import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { launchChromium, type ChromiumHandle } from '../support/chromium.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The consent page's `form-action` also governs the redirect its form's answer makes (Chromium enforces it), so it
 * must name the client. A CSP host-source cannot spell an IPv6 literal: Chromium dropped `http://[::1]:port` from the
 * list and blocked the redirect to the CLI's `[::1]` listener, so that sign-in could never finish. Real Chromium
 * clicks the consent button; the registry's answers reach it through the page session's cookie (`__Host-` cookies
 * cannot be planted on http, so the routed requests carry it).
 */
let server: TestServer;
let browser: RegistryBrowser;
let chromium: ChromiumHandle;
// Registered first, so it runs first: the browser goes before the server it talks to.
test.after(async () => chromium?.close());
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  const alice = await enrolFirst(server.url, 'alice');
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
  chromium = await launchChromium();
});

async function listen(host: string): Promise<{ listener: Server; port: number; arrived: Promise<URL> }> {
  let arrive!: (url: URL) => void;
  const arrived = new Promise<URL>((resolve) => (arrive = resolve));
  const listener = createServer((req, res) => {
    arrive(new URL(req.url ?? '/', 'http://loopback'));
    res.end('signed in');
  });
  await new Promise<void>((resolve) => listener.listen(0, host, resolve));
  return { listener, port: (listener.address() as AddressInfo).port, arrived };
}

for (const [host, literal] of [['::1', '[::1]'], ['127.0.0.1', '127.0.0.1']] as const) {
  for (const decision of ['allow', 'deny'] as const) {
    test(`the consent form's answer (${decision}) reaches the CLI's listener at http://${literal}`, async () => {
      const { listener, port, arrived } = await listen(host);
      const page = await chromium.newPage();
      try {
        const cookie = `__Host-registry_page=${browser.jar.get('__Host-registry_page')!}`;
        await page.route(`${server.url}/**`, async (route) => {
          const response = await route.fetch({ headers: { ...route.request().headers(), cookie }, maxRedirects: 0 });
          await route.fulfill({ response });
        });
        const redirectUri = `http://${literal}:${port}/callback`;
        const shown = await page.goto(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge: pkcePair().challenge, state: 'st' }));
        assert.is(shown?.status(), 200);
        await page.click(`button[value=${decision}]`);
        const timeout = new Promise<undefined>((resolve) => setTimeout(resolve, 5_000, undefined));
        const back = await Promise.race([arrived, timeout]);
        assert.ok(back, `the browser never reached ${redirectUri} (now at ${page.url()})`);
        assert.is(back!.searchParams.get('state'), 'st');
        assert.is(back!.searchParams.get('iss'), server.url);
        if (decision === 'allow') assert.ok(back!.searchParams.get('code'));
        else assert.is(back!.searchParams.get('error'), 'access_denied');
      } finally {
        // Not awaited, either: Chromium keeps connections to the listener (the page's, a favicon's, a preconnect) and
        // waiting for their end at times waited for good.
        void page.close().catch(() => undefined);
        listener.close();
        listener.closeAllConnections();
        listener.unref();
      }
    });
  }
}

test.run();
