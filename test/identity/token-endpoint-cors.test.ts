import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Environment clients are public clients whose redirect URI is a page on the Environment's origin; that page holds
 * the PKCE verifier and then calls the Runtime with the token from its origin. The form POST that exchanges the code
 * is a CORS-simple request (sent, and the code spent, whatever the server says), so without CORS on the token
 * endpoint the page could spend its code but never read the tokens.
 */
let server: TestServer;
let alice: { device: DeviceClient };
let browser: RegistryBrowser;
const ORIGIN = 'https://env-cors.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-cors', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

async function codeExchange(origin: string): Promise<Response> {
  const pkce = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkce.challenge, state: 's' }));
  const form = new URLSearchParams({ grant_type: 'authorization_code', client_id: envClient, code: location!.searchParams.get('code')!, redirect_uri: REDIRECT, code_verifier: pkce.verifier });
  return fetch(`${server.url}/v1/oidc/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin }, body: form.toString() });
}

test("the Environment's page can read the token response for its code (CORS for its registered origin)", async () => {
  const res = await codeExchange(ORIGIN);
  assert.is(res.status, 200);
  assert.is(res.headers.get('access-control-allow-origin'), ORIGIN);
  assert.is(res.headers.get('access-control-allow-credentials'), null, 'no credentials mode');
  const preflight = await fetch(`${server.url}/v1/oidc/token`, { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
  assert.is(preflight.status, 204, `preflight answered ${preflight.status}`);
  assert.match(preflight.headers.get('access-control-allow-methods') ?? '', 'POST');
});

test('a refusal is readable by the page too, and still an OAuth error body', async () => {
  const res = await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ORIGIN },
    body: new URLSearchParams({ grant_type: 'authorization_code', client_id: envClient, code: 'roc_unknown', redirect_uri: REDIRECT, code_verifier: pkcePair().verifier }).toString(),
  });
  assert.is(res.status, 400);
  assert.is(res.headers.get('access-control-allow-origin'), ORIGIN);
  assert.is(((await res.json()) as { error: string }).error, 'invalid_grant');
});

test('a page of any other origin cannot read the answer, and its preflight is refused', async () => {
  const res = await codeExchange('https://stranger.example');
  assert.is(res.headers.get('access-control-allow-origin'), null);
  const preflight = await fetch(`${server.url}/v1/oidc/token`, { method: 'OPTIONS', headers: { origin: 'https://stranger.example', 'access-control-request-method': 'POST' } });
  assert.is(preflight.status, 403);
  assert.is(preflight.headers.get('access-control-allow-origin'), null);
});

test.run();
