import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * OpenID Connect Core 6.1 and 6.2: an OP that does not support the `request` (or `request_uri`) parameter and
 * receives it MUST answer `request_not_supported` (`request_uri_not_supported`). Ignoring it would drop whatever the
 * client put there (a nonce, max_age, a different redirect URI) without telling it. Discovery 1.0 says
 * `request_uri_parameter_supported` is true when omitted, so the metadata must say false.
 */
let server: TestServer;
let alice: { device: DeviceClient; accountId: string };
let browser: RegistryBrowser;
const ORIGIN = 'https://env-ro.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-ro', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const request = (extra: Record<string, string>): string => {
  const url = new URL(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 'st', nonce: 'n1' }));
  for (const [name, value] of Object.entries(extra)) url.searchParams.set(name, value);
  return url.href;
};

for (const [parameter, value, error] of [
  ['request', 'eyJhbGciOiJub25lIn0.eyJtYXhfYWdlIjo2MCwibm9uY2UiOiJuMiJ9.', 'request_not_supported'],
  ['request_uri', 'https://env-ro.example/requests/1', 'request_uri_not_supported'],
] as const) {
  test(`${parameter} is refused with ${error}, back at the redirect URI with state and iss, and no code`, async () => {
    const res = await browser.fetch(request({ [parameter]: value }));
    assert.is(res.status, 303, `expected a redirect to the client; got ${res.status}`);
    const back = new URL(res.headers.get('location')!);
    assert.is(back.origin + back.pathname, REDIRECT);
    assert.is(back.searchParams.get('error'), error);
    assert.is(back.searchParams.get('state'), 'st');
    assert.is(back.searchParams.get('iss'), server.url);
    assert.is(back.searchParams.get('code'), null);
  });
}

test('prompt=none with a request object is refused the same way, not answered with a code', async () => {
  await browser.authorize(request({}));
  const res = await browser.fetch(request({ prompt: 'none', request: 'eyJhbGciOiJub25lIn0.e30.' }));
  const back = new URL(res.headers.get('location')!);
  assert.is(back.searchParams.get('error'), 'request_not_supported');
  assert.is(back.searchParams.get('code'), null);
});

test('discovery says neither request nor request_uri is supported (request_uri defaults to true when omitted)', async () => {
  const discovery = (await (await fetch(`${server.url}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  assert.is(discovery.request_parameter_supported, false);
  assert.is(discovery.request_uri_parameter_supported, false);
});

test('response_mode other than query (fragment, form_post) is refused invalid_request, not answered by query where the client does not look; query is accepted', async () => {
  for (const mode of ['fragment', 'form_post']) {
    const res = await browser.fetch(request({ response_mode: mode }));
    assert.is(res.status, 303, mode);
    const back = new URL(res.headers.get('location')!);
    assert.is(back.searchParams.get('error'), 'invalid_request', mode);
    assert.match(back.searchParams.get('error_description') ?? '', /response_mode/);
    assert.is(back.searchParams.get('code'), null);
  }
  const { location } = await browser.authorize(request({ response_mode: 'query' }));
  assert.ok(location?.searchParams.get('code'), 'response_mode=query is what the registry does');
});

test.run();
