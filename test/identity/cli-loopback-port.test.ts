import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 8252 7.3: "The authorization server MUST allow any port to be specified at the time of the request for loopback
 * IP redirect URIs". Port 80 is a port: WHATWG URL drops the scheme's default port from `href`, so a check that wants
 * `href` to equal the URI as sent refused `http://127.0.0.1:80/callback` (and the portless form, which names port 80 too).
 */
let server: TestServer;
let browser: RegistryBrowser;
let alice: { device: DeviceClient };
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

for (const redirectUri of ['http://127.0.0.1:80/callback', 'http://[::1]:80/callback', 'http://127.0.0.1/callback']) {
  test(`the CLI client may return to ${redirectUri}, and the code is exchanged with that exact redirect URI`, async () => {
    const { verifier, challenge } = pkcePair();
    const page = await browser.fetch(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge, state: 's' }));
    assert.is(page.status, 200, `${redirectUri}: ${page.status}`);
    const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge, state: 's' }));
    assert.ok(location, 'redirected back');
    assert.is(location!.origin + location!.pathname, new URL(redirectUri).origin + '/callback');
    const code = location!.searchParams.get('code')!;
    const tokens = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: CLI_CLIENT_ID, code, redirect_uri: redirectUri, code_verifier: verifier });
    assert.is(tokens.status, 200, JSON.stringify(tokens.body));
  });
}

test('loopback literals stay exact otherwise: another spelling of the host or port is not the loopback redirect', async () => {
  for (const redirectUri of ['http://127.1:80/callback', 'http://127.0.0.1:080/callback', 'http://localhost:80/callback', 'HTTP://127.0.0.1:80/callback', 'http://127.0.0.1:80']) {
    const res = await browser.fetch(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge: pkcePair().challenge, state: 's' }));
    assert.is(res.status, 400, redirectUri);
  }
});

test.run();
