import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { cliSignIn, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 6: the refresh request's `scope` "MUST NOT include any scope not originally granted by the resource
 * owner, and if omitted is treated as equal to the scope originally granted"; 5.2 `invalid_scope`. A narrower scope is
 * refused as well (documented on the token endpoint): an access token is checked against its grant's scopes, so a
 * narrowed one would not be narrower where it counts. A refused refresh must not spend the refresh token.
 */
let server: TestServer;
let alice: { device: DeviceClient; accountId: string };
let browser: RegistryBrowser;
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});
const signIn = (): Promise<TokenSet> =>
  cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
const refresh = (refreshToken: string, scope?: string) =>
  tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: refreshToken, ...(scope === undefined ? {} : { scope }) });

test('a refresh asking for a scope beyond the grant is invalid_scope, and the refresh token stays usable', async () => {
  const tokens = await signIn();
  const res = await refresh(tokens.refresh_token!, 'openid management platform:admin');
  assert.equal([res.status, res.body.error, res.body.code], [400, 'invalid_scope', 'scope_exceeds_grant'], JSON.stringify(res.body).slice(0, 200));
  const after = await refresh(tokens.refresh_token!);
  assert.is(after.status, 200, 'the refused refresh spent the token');
});

test('a refresh asking for fewer scopes than the grant is refused (invalid_scope), not silently widened', async () => {
  const tokens = await signIn();
  const res = await refresh(tokens.refresh_token!, 'openid');
  assert.equal([res.status, res.body.error, res.body.code], [400, 'invalid_scope', 'scope_narrowing_unsupported']);
  assert.is((await refresh(tokens.refresh_token!)).status, 200);
});

test('scope omitted, empty, or naming exactly the grant (any order): the original scope', async () => {
  let token = (await signIn()).refresh_token!;
  for (const scope of [undefined, '', 'management openid', 'openid management openid']) {
    const res = await refresh(token, scope);
    assert.is(res.status, 200, `scope ${JSON.stringify(scope)}: ${JSON.stringify(res.body)}`);
    assert.is(res.body.scope, 'openid management');
    token = String(res.body.refresh_token);
  }
});

test('a spent refresh token with a scope beyond the grant is still reuse: the sign-in is revoked', async () => {
  const tokens = await signIn();
  const next = await refresh(tokens.refresh_token!);
  assert.is(next.status, 200);
  const reused = await refresh(tokens.refresh_token!, 'openid management platform:admin');
  assert.equal([reused.status, reused.body.error, reused.body.code], [400, 'invalid_grant', 'refresh_token_reused']);
  assert.equal((await refresh(String(next.body.refresh_token))).body.error, 'invalid_grant');
});

test.run();
