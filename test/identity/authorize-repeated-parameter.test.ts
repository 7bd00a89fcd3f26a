import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 4.1.2.1: once client_id and redirect_uri are trusted, every other failure of the authorization request
 * (a parameter "included more than once" and a missing required one among them: `invalid_request`) goes back to the
 * redirect URI with `error`, `state` and `iss`, so the client learns the sign-in failed. Only doubt about the client or
 * its redirect URI keeps the browser on the registry's error page.
 */
let server: TestServer;
let alice: { device: DeviceClient; accountId: string };
let browser: RegistryBrowser;
const ORIGIN = 'https://env-dup.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-dup', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const request = (extra = ''): string =>
  authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 'first', nonce: 'n1', scope: 'openid runtime' }) + extra;

/** Where the browser is sent back to, asserting it is the client's redirect URI. */
async function redirectedBack(url: string): Promise<URLSearchParams> {
  const res = await browser.fetch(url);
  assert.is(res.status, 303, `expected a redirect to the client; got ${res.status} ${res.headers.get('content-type')}: ${(await res.text()).slice(0, 200)}`);
  const back = new URL(res.headers.get('location')!);
  assert.is(back.origin + back.pathname, REDIRECT);
  assert.is(back.searchParams.get('iss'), server.url);
  return back.searchParams;
}

async function errorPageCode(url: string): Promise<string | undefined> {
  const res = await browser.fetch(url);
  assert.is(res.status, 400, `expected the error page; got ${res.status} ${res.headers.get('location') ?? ''}`);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  return /<meta name="registry-error-code" content="([^"]+)">/.exec(await res.text())?.[1];
}

for (const [repeated, echoed] of [['scope=openid', 'first'], ['nonce=n2', 'first'], ['code_challenge_method=S256', 'first'], ['prompt=none&prompt=consent', 'first'], ['state=second', null]] as const) {
  test(`a repeated ${repeated.split('=')[0]} with a trusted client and redirect URI goes back as invalid_request`, async () => {
    const back = await redirectedBack(request(`&${repeated}`));
    assert.is(back.get('error'), 'invalid_request');
    assert.match(back.get('error_description') ?? '', repeated.split('=')[0]!);
    // Which of two states the client would recognise is unknown: neither is echoed.
    assert.is(back.get('state'), echoed);
  });
}

test('a repeated client_id or redirect_uri is never redirected to: the error page', async () => {
  assert.is(await errorPageCode(request(`&client_id=${encodeURIComponent(envClient)}`)), 'client_id_repeated');
  assert.is(await errorPageCode(request(`&redirect_uri=${encodeURIComponent(REDIRECT)}`)), 'redirect_uri_repeated');
});

test('a repeated parameter the endpoint does not know is ignored (RFC 6749 3.1)', async () => {
  const res = await browser.fetch(request('&ui_locales=en&ui_locales=de'));
  assert.is(res.status, 200, 'the consent page');
});

test('response_type missing (or empty): invalid_request, a required parameter is missing', async () => {
  for (const value of [undefined, '']) {
    const url = new URL(request());
    if (value === undefined) url.searchParams.delete('response_type');
    else url.searchParams.set('response_type', value);
    const back = await redirectedBack(url.href);
    assert.is(back.get('error'), 'invalid_request', `response_type ${String(value)}`);
    assert.is(back.get('state'), 'first');
  }
});

test('response_type other than code: unsupported_response_type', async () => {
  const url = new URL(request());
  url.searchParams.set('response_type', 'token');
  assert.is((await redirectedBack(url.href)).get('error'), 'unsupported_response_type');
});

test.run();
