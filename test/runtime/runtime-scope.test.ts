import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Environment clients may ask for `openid runtime` or less. A token granted `openid` alone (the person agreed to be
 * known, and `prompt=none` treats `runtime` as a separate agreement) is not a Runtime credential, just as a CLI token
 * without `management` is refused as a management bearer (403 insufficient_scope).
 */
let server: TestServer;
const ORIGIN = 'https://env-scope.example';
const REDIRECT = `${ORIGIN}/cb`;

withTestServer(test, (started) => ({ server } = started), productParts);

test('a runtime access token granted only openid does not open a Runtime session', async () => {
  const { device } = await enrolFirst(server.url, 'pia');
  const { clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'env-scope', origin: ORIGIN, ownerHandle: 'pia', redirectUris: [REDIRECT] });
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  const { verifier, challenge } = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: REDIRECT, challenge, scope: 'openid' }));
  const tokens = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: location!.searchParams.get('code')!, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.is(tokens.status, 200);
  assert.is(tokens.body.scope, 'openid');
  const res = await new RuntimeClient(server.url, String(tokens.body.access_token), ORIGIN).createSession();
  await assertProblem(res, 403, 'insufficient_scope');
  assert.match(res.headers.get('www-authenticate') ?? '', /insufficient_scope/);
});

test.run();
