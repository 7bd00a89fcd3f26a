import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { cliSignIn, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolAnother, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Refresh rotations racing each other and the end of their sign-in. Whatever the interleaving: at most one rotation of
 * a token wins, and at most one retry of it within the reuse grace (refresh-reuse-grace.test.ts); a token presented
 * again beyond that revokes the whole sign-in, the winners' new tokens included; a sign-in revoked,
 * or ended by a device removal (the account epoch), leaves no token of the race working once both have answered; and
 * every refusal is an OAuth `invalid_grant`, never a 500.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

type TokenAnswer = Awaited<ReturnType<typeof tokenRequest>>;

async function cliTokens(device: DeviceClient): Promise<TokenSet> {
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  return cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
}

const refresh = (token: string): Promise<TokenAnswer> => tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: token });

/** Whether anything a rotation answered still works: its access token on a management call, its refresh token. */
async function stillWorks(answer: TokenAnswer): Promise<boolean> {
  const call = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${String(answer.body.access_token)}` } });
  return call.status === 200 || (await refresh(String(answer.body.refresh_token))).status === 200;
}

function assertRefusals(answers: readonly TokenAnswer[], codes: readonly string[], round: number): void {
  for (const a of answers) {
    if (a.status === 200) continue;
    assert.is(a.status, 400, `round ${round}: ${JSON.stringify(a.body)}`);
    assert.is(a.body.error, 'invalid_grant');
    assert.ok(codes.includes(String(a.body.code)), `round ${round}: ${JSON.stringify(a.body)}`);
  }
}

test('one refresh token presented six times at once: at most a rotation and a retry win, and the reuse ends both', async () => {
  const { device } = await enrolFirst(server.url, 'rota', '127.0.0.2');
  for (let round = 0; round < 20; round++) {
    const tokens = await cliTokens(device);
    const answers = await Promise.all(Array.from({ length: 6 }, () => refresh(tokens.refresh_token!)));
    assertRefusals(answers, ['refresh_token_reused', 'grant_revoked'], round);
    const won = answers.filter((a) => a.status === 200);
    assert.ok(won.length <= 2, `round ${round}: ${won.length} rotations of one token won`);
    for (const w of won) assert.not.ok(await stillWorks(w), `round ${round}: the winner's tokens survived the reuse`);
  }
});

test("refreshes racing the sign-in's revocation: nothing of the race works once both answered", async () => {
  const { device } = await enrolFirst(server.url, 'rotb', '127.0.0.3');
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  for (let round = 0; round < 20; round++) {
    const tokens = await cliTokens(device);
    const listed = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    const sessionId = ((await listed.json()) as { sessions: Array<{ sessionId: string; current: boolean }> }).sessions.find((s) => s.current)!.sessionId;
    const revoked = fetch(`${server.url}/v1/auth/management-sessions/${sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${accessToken}` } });
    const answers = await Promise.all([refresh(tokens.refresh_token!), refresh(tokens.refresh_token!)]);
    assert.is((await revoked).status, 200);
    assertRefusals(answers, ['refresh_token_reused', 'grant_revoked'], round);
    for (const a of answers.filter((x) => x.status === 200)) assert.not.ok(await stillWorks(a), `round ${round}: a rotation outlived the revocation`);
  }
});

test('refreshes racing the removal of a device: nothing of the race works once the removal answered', async () => {
  const { device: owner } = await enrolFirst(server.url, 'rotc', '127.0.0.4');
  // 12 rounds: each enrols a device from 127.0.0.1, and enrolment starts are limited per address (bursts of 20).
  for (let round = 0; round < 12; round++) {
    const laptop = await enrolAnother(server.url, 'rotc', owner, `laptop ${round}`);
    const tokens = await cliTokens(laptop);
    const removal = owner.request(server.url, 'DELETE', `/v1/account/devices/${laptop.deviceId!}`);
    const answers = await Promise.all([refresh(tokens.refresh_token!), refresh(tokens.refresh_token!)]);
    assert.is((await removal).status, 200);
    assertRefusals(answers, ['refresh_token_reused', 'grant_revoked', 'account_epoch_stale'], round);
    for (const a of answers.filter((x) => x.status === 200)) assert.not.ok(await stillWorks(a), `round ${round}: a rotation outlived the removal`);
  }
});

test.run();
