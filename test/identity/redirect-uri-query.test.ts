import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 3.1.2: a redirect URI's query "MUST be retained when adding additional query parameters". The answer was
 * built by re-serialising the registered query through URLSearchParams, which rewrote it: `a%20b` came back as `a+b`
 * (a plus sign to decodeURIComponent) and a bare `flag` as `flag=`.
 */
const ORIGIN = 'https://env-query.example';
const REDIRECT = `${ORIGIN}/cb?next=%2Fhome%20page&flag&iss=ours-wins`;
let server: TestServer;
let browser: RegistryBrowser;
let clientId: string;
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  const alice = await enrolFirst(server.url, 'alice');
  ({ clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'env-query', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const request = (extra: Record<string, string> = {}) => {
  const url = new URL(authorizationUrl(server.url, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 'st' }));
  for (const [name, value] of Object.entries(extra)) url.searchParams.set(name, value);
  return url.href;
};

/** The Location as sent, and its registry-added parameters. */
function answer(location: string): { query: string; added: URLSearchParams } {
  const query = location.slice(location.indexOf('?') + 1);
  return { query, added: new URLSearchParams(query) };
}

test('a code comes back after the registered query, kept byte for byte', async () => {
  const { response } = await browser.authorize(request());
  const location = response.headers.get('location')!;
  assert.ok(location.startsWith(`${ORIGIN}/cb?next=%2Fhome%20page&flag&`), location);
  const { added } = answer(location);
  assert.ok(added.get('code'));
  assert.is(added.get('state'), 'st');
  // A registered parameter named like one the registry sends gives way: the client reads one iss, the registry's.
  assert.equal(added.getAll('iss'), [server.url]);
});

test('an error comes back after the registered query too', async () => {
  const res = await browser.fetch(request({ response_type: 'token' }));
  assert.is(res.status, 303);
  const location = res.headers.get('location')!;
  assert.ok(location.startsWith(`${ORIGIN}/cb?next=%2Fhome%20page&flag&`), location);
  const { added } = answer(location);
  assert.is(added.get('error'), 'unsupported_response_type');
  assert.equal(added.getAll('iss'), [server.url]);
});

test.run();
