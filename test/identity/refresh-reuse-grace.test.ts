import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { cliSignIn, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The refresh-token reuse grace (REFRESH_TOKEN_REUSE_GRACE_SECONDS, 30 by default; RFC 9700 4.14.2): a CLI whose
 * refresh reply was lost retries with the token it still holds. Within the grace after that token's rotation, and
 * while the successor the lost reply carried was never used, the retry is answered like a rotation and that successor
 * is spent (at most one live refresh token per sign-in). Once per rotation: anything else is reuse as before, and
 * revokes the sign-in, which is also what presenting the replaced successor does.
 */
let server: TestServer;
let browser: RegistryBrowser;
const clock = new ManualClock(Date.now());
withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);
test.before(async () => {
  const { device } = await enrolFirst(server.url, 'grace', '127.0.0.5');
  browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
});

type TokenAnswer = Awaited<ReturnType<typeof tokenRequest>>;

function signIn(): Promise<TokenSet> {
  return cliSignIn(
    server.url,
    CLI_CLIENT_ID,
    async (url) => {
      const { location } = await browser.authorize(url);
      await fetch(location!);
    },
    { now: () => clock.now() },
  );
}

const refresh = (token: string, scope?: string): Promise<TokenAnswer> =>
  tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: token, ...(scope === undefined ? {} : { scope }) });
const refreshToken = (answer: TokenAnswer): string => String(answer.body.refresh_token);
const managementCall = (answer: TokenAnswer): Promise<number> =>
  fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${String(answer.body.access_token)}` } }).then((r) => r.status);

function assertRefused(answer: TokenAnswer, code: string, message?: string): void {
  assert.equal([answer.status, answer.body.error, answer.body.code], [400, 'invalid_grant', code], message ?? JSON.stringify(answer.body));
}

/** The sign-in is revoked: its newest refresh token is refused as such, and an access token of it no longer works. */
async function assertSignInRevoked(newest: TokenAnswer): Promise<void> {
  assert.is(await managementCall(newest), 401);
  assertRefused(await refresh(refreshToken(newest)), 'grant_revoked');
}

test('a retry within the grace is answered like a rotation; the successor of the lost reply is spent', async () => {
  const first = await signIn();
  const lost = await refresh(first.refresh_token!);
  assert.is(lost.status, 200);
  clock.advance(10_000);
  const retried = await refresh(first.refresh_token!);
  assert.is(retried.status, 200, JSON.stringify(retried.body));
  assert.is.not(refreshToken(retried), refreshToken(lost));
  assert.is(retried.body.scope, 'openid management');
  assert.is(await managementCall(retried), 200);
  // The retry's own token goes on rotating.
  const next = await refresh(refreshToken(retried));
  assert.is(next.status, 200);
  // Whoever holds the replaced successor is a second party: reuse, the whole sign-in ends.
  assertRefused(await refresh(refreshToken(lost)), 'refresh_token_reused');
  await assertSignInRevoked(next);
});

test('the replaced successor presented at once is reuse too, even with a fresh successor of its generation', async () => {
  const first = await signIn();
  const lost = await refresh(first.refresh_token!);
  const retried = await refresh(first.refresh_token!);
  assert.is(retried.status, 200);
  // The retry's token rotated at once: the replaced one is not the token a rotation spent, so it gets no grace.
  const next = await refresh(refreshToken(retried));
  assert.is(next.status, 200);
  assertRefused(await refresh(refreshToken(lost)), 'refresh_token_reused');
  await assertSignInRevoked(next);
});

test('a retry after the grace is reuse: the sign-in is revoked', async () => {
  const first = await signIn();
  const lost = await refresh(first.refresh_token!);
  assert.is(lost.status, 200);
  clock.advance(30_001);
  assertRefused(await refresh(first.refresh_token!), 'refresh_token_reused');
  await assertSignInRevoked(lost);
});

test('a retry after its successor was used is reuse: the sign-in is revoked', async () => {
  const first = await signIn();
  const second = await refresh(first.refresh_token!);
  const third = await refresh(refreshToken(second));
  assert.is(third.status, 200);
  // The first token is older than the last rotation; the second is the one just rotated, but its successor is used.
  assertRefused(await refresh(first.refresh_token!), 'refresh_token_reused');
  await assertSignInRevoked(third);
  const again = await signIn();
  const a = await refresh(again.refresh_token!);
  const b = await refresh(refreshToken(a));
  await refresh(refreshToken(b));
  assertRefused(await refresh(refreshToken(a)), 'refresh_token_reused');
});

test('one retry per rotation: a second retry of the same token is reuse, whatever the clock says', async () => {
  const first = await signIn();
  await refresh(first.refresh_token!);
  const retried = await refresh(first.refresh_token!);
  assert.is(retried.status, 200);
  assertRefused(await refresh(first.refresh_token!), 'refresh_token_reused');
  await assertSignInRevoked(retried);
});

test('a retry naming other scopes than the sign-in is no retry of the lost request: reuse, as without the grace', async () => {
  const first = await signIn();
  const lost = await refresh(first.refresh_token!);
  assertRefused(await refresh(first.refresh_token!, 'openid management platform:admin'), 'refresh_token_reused');
  await assertSignInRevoked(lost);
  const again = await signIn();
  await refresh(again.refresh_token!);
  assert.is((await refresh(again.refresh_token!, 'management openid')).status, 200, 'the same scopes in another order are the same request');
});

test('two retries at once within the grace: exactly one is answered, the other is reuse and ends the sign-in', async () => {
  for (let round = 0; round < 10; round++) {
    const first = await signIn();
    const lost = await refresh(first.refresh_token!);
    assert.is(lost.status, 200);
    const answers = await Promise.all([refresh(first.refresh_token!), refresh(first.refresh_token!)]);
    const won = answers.filter((a) => a.status === 200);
    assert.is(won.length, 1, `round ${round}: ${JSON.stringify(answers.map((a) => a.body.code ?? a.status))}`);
    const refused = answers.find((a) => a.status !== 200)!;
    assertRefused(refused, 'refresh_token_reused', `round ${round}: ${JSON.stringify(refused.body)}`);
    await assertSignInRevoked(won[0]!);
  }
});

test("a retry racing the rotation of the lost reply's successor: one of them is answered, the other is reuse", async () => {
  for (let round = 0; round < 10; round++) {
    const first = await signIn();
    const lost = await refresh(first.refresh_token!);
    const answers = await Promise.all([refresh(first.refresh_token!), refresh(refreshToken(lost))]);
    const won = answers.filter((a) => a.status === 200);
    assert.is(won.length, 1, `round ${round}: ${JSON.stringify(answers.map((a) => a.body.code ?? a.status))}`);
    assertRefused(answers.find((a) => a.status !== 200)!, 'refresh_token_reused', `round ${round}`);
    await assertSignInRevoked(won[0]!);
  }
});

test('the token endpoint states the grace', async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, { post: { description: string } }> };
  assert.match(doc.paths['/v1/oidc/token']!.post.description, /within 30 seconds of its rotation, a spent refresh token presented again/);
});

test.run();
