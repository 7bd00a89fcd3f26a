import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A parameter of the authorization request holding text Postgres cannot keep (U+0000, sent as `%00`) is a malformed
 * request like any other: RFC 6749 4.1.2.1 sends it back to a trusted redirect URI as `invalid_request`, so the client
 * learns the sign-in failed, rather than leaving the person on a JSON body. A client or redirect URI holding one
 * cannot be trusted: the registry's error page. An unrecognised parameter is ignored (RFC 6749 3.1), whatever it holds.
 */
let server: TestServer;
let browser: RegistryBrowser;
const ORIGIN = 'https://env-nul.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  const alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-nul', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

/** The request with `name` set to `raw` exactly as written into the query (already percent-encoded). */
const request = (name: string, raw: string, clientId = envClient, redirectUri = REDIRECT): string => {
  const url = new URL(authorizationUrl(server.url, { clientId, redirectUri, challenge: pkcePair().challenge, state: 'st-1', nonce: 'n1' }));
  url.searchParams.delete(name);
  return `${url.href}&${name}=${raw}`;
};

async function redirectedBack(url: string): Promise<URLSearchParams> {
  const res = await browser.fetch(url);
  assert.is(res.status, 303, `expected a redirect to the client; got ${res.status} ${res.headers.get('content-type')}: ${(await res.text()).slice(0, 300)}`);
  const back = new URL(res.headers.get('location')!);
  assert.is(back.origin + back.pathname, REDIRECT);
  assert.is(back.searchParams.get('iss'), server.url);
  assert.is(back.searchParams.get('code'), null);
  return back.searchParams;
}

for (const name of ['nonce', 'scope', 'code_challenge', 'max_age', 'prompt']) {
  test(`U+0000 in ${name} goes back to the client as invalid_request, with its state`, async () => {
    const back = await redirectedBack(request(name, 'a%00b'));
    assert.is(back.get('error'), 'invalid_request');
    assert.match(back.get('error_description') ?? '', name);
    assert.is(back.get('state'), 'st-1');
  });
}

test('U+0000 in state goes back as invalid_request without echoing the state', async () => {
  const back = await redirectedBack(request('state', 'st%00'));
  assert.is(back.get('error'), 'invalid_request');
  assert.is(back.get('state'), null);
});

test('U+0000 in state beside a repeated parameter: invalid_request, the state not echoed either', async () => {
  const back = await redirectedBack(request('state', 'st%00') + '&nonce=n2');
  assert.is(back.get('error'), 'invalid_request');
  assert.is(back.get('state'), null);
});

test('U+0000 in client_id or redirect_uri: the error page, never a redirect', async () => {
  for (const url of [
    request('client_id', 'envc%00'),
    request('redirect_uri', encodeURIComponent(REDIRECT) + '%00'),
    request('redirect_uri', encodeURIComponent('http://127.0.0.1:4000/callback') + '%00', CLI_CLIENT_ID, 'http://127.0.0.1:4000/callback'),
  ]) {
    const res = await browser.fetch(url);
    assert.is(res.status, 400, url);
    assert.is(res.headers.get('location'), null);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(await res.text(), /<meta name="registry-error-code" content="(client_unknown|redirect_uri_invalid)">/);
  }
});

test('an unrecognised parameter holding U+0000 is ignored: the consent page', async () => {
  const res = await browser.fetch(request('ui_hint', 'x%00y'));
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
});

test.run();
