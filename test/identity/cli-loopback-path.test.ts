import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 8252 7.3: for a loopback redirect the port is the one part of the registered URI a request may change; scheme,
 * host and path must match. The CLI client took any loopback path, so anyone could bounce a signed-in browser (with an
 * error or, after consent, a code) to any path of any service listening on the machine. A path (or query) the CLI
 * did not register is an untrusted redirect URI: the error page, never a redirect (RFC 6749 4.1.2.1), even for errors
 * the request would otherwise be sent back with (prompt=none).
 */
let db: TestDatabase;
let server: TestServer;
let browser: RegistryBrowser;
let frank: { device: DeviceClient };
const suite = withTestServer(test, (s) => ({ db, server } = s), productParts);
test.before(async () => {
  frank = await enrolFirst(server.url, 'frank');
  browser = new RegistryBrowser(server.url, frank.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const url = (redirectUri: string, extra: { prompt?: string } = {}): string =>
  authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge: pkcePair().challenge, state: 's', ...extra });

test('a loopback redirect URI on another path, or with a query, gets the error page and no redirect', async () => {
  for (const redirectUri of [
    'http://127.0.0.1:8080/admin/delete',
    'http://127.0.0.1:5000/',
    'http://[::1]:5000/other',
    'http://127.0.0.1:5000/callback/x',
    'http://127.0.0.1:5000/Callback',
    'http://127.0.0.1:5000/callback?next=/admin',
  ]) {
    for (const prompt of [undefined, 'none']) {
      const res = await browser.fetch(url(redirectUri, prompt === undefined ? {} : { prompt }));
      assert.is(res.status, 400, `${redirectUri} prompt=${String(prompt)}: ${res.status} ${res.headers.get('location') ?? ''}`);
      assert.is(res.headers.get('location'), null, redirectUri);
      assert.match(await res.text(), /<meta name="registry-error-code" content="redirect_uri_invalid">/, redirectUri);
    }
  }
});

test('the registered path on any port of either loopback literal is taken', async () => {
  for (const redirectUri of ['http://127.0.0.1:5000/callback', 'http://[::1]:61234/callback', 'http://127.0.0.1/callback']) {
    assert.is((await browser.fetch(url(redirectUri))).status, 200, redirectUri);
    const silent = await browser.fetch(url(redirectUri, { prompt: 'none' }));
    assert.is(silent.status, 303, redirectUri);
    assert.is(new URL(silent.headers.get('location')!).searchParams.get('error'), 'consent_required');
  }
});

test('a database whose CLI client registered no redirect URI (made before this rule) gets them at the next start', async () => {
  await db.connection.db.updateTable('oidc_clients').set({ redirect_uris: '[]' }).where('client_id', '=', CLI_CLIENT_ID).execute();
  await suite.restart();
  browser = new RegistryBrowser(server.url, frank.device);
  assert.is((await browser.openPageSession()).status, 204);
  assert.is((await browser.fetch(url('http://127.0.0.1:5000/elsewhere'))).status, 400);
  assert.is((await browser.fetch(url('http://127.0.0.1:5000/callback'))).status, 200);
});

test.run();
