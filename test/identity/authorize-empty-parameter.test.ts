import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 3.1: "Parameters sent without a value MUST be treated as if they were omitted from the request." A client
 * whose URL template leaves an optional parameter empty (`prompt=`, `max_age=`, `request=`) is making an ordinary
 * request, not an invalid or unsupported one; an empty `state` is no state to send back.
 */
let server: TestServer;
let browser: RegistryBrowser;
const ORIGIN = 'https://env-empty.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  const alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-empty', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const request = (challenge: string, extra: string): string =>
  authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge, state: 'st-1', nonce: 'n1' }) + extra;

for (const name of ['prompt', 'max_age', 'request', 'request_uri', 'id_token_hint']) {
  test(`an empty ${name} is no ${name}: the consent page, then a code`, async () => {
    const { verifier, challenge } = pkcePair();
    const page = await browser.fetch(request(challenge, `&${name}=`));
    assert.is(page.status, 200, `${page.status} ${page.headers.get('location') ?? ''}`);
    const { location } = await browser.authorize(request(challenge, `&${name}=`));
    assert.ok(location?.searchParams.get('code'), location?.href);
    assert.is(location!.searchParams.get('state'), 'st-1');
    const tokens = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: location!.searchParams.get('code')!, redirect_uri: REDIRECT, code_verifier: verifier });
    assert.is(tokens.status, 200, JSON.stringify(tokens.body));
  });
}

test('an empty state is no state: the answer carries none', async () => {
  const url = new URL(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge }));
  url.searchParams.set('state', '');
  const { location } = await browser.authorize(url.href);
  assert.ok(location?.searchParams.get('code'), location?.href);
  assert.is(location!.searchParams.has('state'), false, location!.href);
  url.searchParams.set('response_type', 'token');
  const refused = new URL((await browser.fetch(url.href)).headers.get('location')!);
  assert.is(refused.searchParams.get('error'), 'unsupported_response_type');
  assert.is(refused.searchParams.has('state'), false, refused.href);
});

test('an empty required parameter is a missing one', async () => {
  const url = new URL(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 'st-1' }));
  url.searchParams.set('code_challenge', '');
  const back = new URL((await browser.fetch(url.href)).headers.get('location')!);
  assert.is(back.searchParams.get('error'), 'invalid_request');
  assert.match(back.searchParams.get('error_description') ?? '', 'PKCE is required');
});

test.run();
