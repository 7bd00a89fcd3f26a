import { decodeJwt } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { LIVE_SESSION_CAPS } from '../../identity/live-session-caps.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { assertApiError, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * An account holds at most LIVE_SESSION_CAPS.cli live CLI sign-ins: a new one never fails and ends the least recently
 * used beyond the cap with its tokens (identity/oauth-grants.ts), through HTTP against the real server and Postgres.
 */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());

withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);

const REDIRECT = 'http://127.0.0.1:49152/callback';

/** A signed-in registry browser of a new account, its device on the test's clock. */
async function signedInBrowser(handle: string): Promise<{ browser: RegistryBrowser; accountId: string }> {
  const { device, accountId } = await enrolFirst(server.url, handle);
  device.now = () => clock.now();
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  return { browser, accountId };
}

/** An authorization code for the CLI client, not yet exchanged. */
async function cliCode(browser: RegistryBrowser): Promise<{ code: string; verifier: string }> {
  const { verifier, challenge } = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri: REDIRECT, challenge, scope: 'openid management' }));
  assert.ok(location, 'the authorization page redirects with a code');
  return { code: location.searchParams.get('code')!, verifier };
}

async function exchange({ code, verifier }: { code: string; verifier: string }): Promise<TokenSet> {
  const { status, body } = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: CLI_CLIENT_ID, code, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.is(status, 200, `a sign-in at the cap must not fail: ${JSON.stringify(body)}`);
  return body as unknown as TokenSet;
}

const signIn = async (browser: RegistryBrowser): Promise<TokenSet> => exchange(await cliCode(browser));
const grantOf = (tokens: TokenSet): string => decodeJwt(tokens.access_token).sid as string;

async function liveCliGrants(accountId: string): Promise<string[]> {
  const rows = await db.connection.db
    .selectFrom('oauth_grants')
    .select('id')
    .where('account_id', '=', accountId)
    .where('kind', '=', 'cli')
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', new Date(clock.now()))
    .execute();
  return rows.map((r) => r.id);
}

const managementSessions = (tokens: TokenSet): Promise<Response> =>
  fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${tokens.access_token}` } });

test('the sign-in past the cap ends the least recently used one with its tokens; the refreshed oldest stays; another account is untouched', async () => {
  const cap = LIVE_SESSION_CAPS.cli;
  const lea = await signedInBrowser('lea');
  const max = await signedInBrowser('max');
  const maxTokens = await signIn(max.browser);
  const signIns: TokenSet[] = [];
  for (let i = 0; i < cap; i++) {
    signIns.push(await signIn(lea.browser));
    clock.advance(1000);
  }
  assert.is((await liveCliGrants(lea.accountId)).length, cap);
  // Refreshing the oldest marks it in use: the second oldest is now the least recently used.
  const refreshed = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: signIns[0]!.refresh_token! });
  assert.is(refreshed.status, 200);
  clock.advance(1000);

  const newest = await signIn(lea.browser);

  const live = await liveCliGrants(lea.accountId);
  assert.is(live.length, cap, 'the account holds the cap, not one more');
  assert.ok(live.includes(grantOf(newest)), 'the new sign-in is live');
  assert.ok(live.includes(grantOf(signIns[0]!)), 'the refreshed oldest is live');
  assert.not.ok(live.includes(grantOf(signIns[1]!)), 'the least recently used one ended');
  const ended = await db.connection.db.selectFrom('oauth_grants').select('revoked_reason').where('id', '=', grantOf(signIns[1]!)).executeTakeFirstOrThrow();
  assert.is(ended.revoked_reason, 'session_cap');

  // Its tokens ended with it.
  const refresh = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: signIns[1]!.refresh_token! });
  assert.is(refresh.status, 400);
  assert.is(refresh.body.code, 'grant_revoked');
  await assertApiError(await managementSessions(signIns[1]!), 401, 'access_token_revoked');

  // The live ones still work, and the listing holds the cap.
  const listed = await managementSessions(newest);
  assert.is(listed.status, 200);
  assert.is(((await listed.json()) as { sessions: unknown[] }).sessions.length, cap);
  assert.is((await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: refreshed.body.refresh_token as string })).status, 200);
  // Another account is not held back by Lea's.
  assert.equal(await liveCliGrants(max.accountId), [grantOf(maxTokens)]);
  assert.is((await managementSessions(maxTokens)).status, 200);
});

test('a burst of concurrent sign-ins past the cap all succeed and leave the cap live', async () => {
  const cap = LIVE_SESSION_CAPS.cli;
  const ned = await signedInBrowser('ned');
  const codes = [];
  for (let i = 0; i < cap + 15; i++) codes.push(await cliCode(ned.browser));
  const burst = await Promise.all(codes.map(exchange));
  // Batches in flight at once that each stayed below the cap alone may leave an excess (as large as the batches) to
  // the next sign-in, which trims to the cap below.
  const afterBurst = (await liveCliGrants(ned.accountId)).length;
  assert.ok(afterBurst >= cap, `the burst left ${afterBurst} live`);
  clock.advance(1000);
  const next = await signIn(ned.browser);
  const live = await liveCliGrants(ned.accountId);
  assert.is(live.length, cap);
  assert.ok(live.includes(grantOf(next)));
  assert.is(new Set(burst.map(grantOf)).size, cap + 15, 'every exchange of the burst made its own sign-in');
});

test.run();
