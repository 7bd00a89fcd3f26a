import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RegistryBrowser } from '../../client/oidc-client.js';
import { environmentSignIn, RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { assertProblem } from '../support/identity.js';
import { connect, controlToken, controlUrl } from '../support/runtime-socket.js';
import { logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * What bounds the Runtime sessions one person can leave behind: the cap on live sessions per Environment (429
 * `runtime_session_quota_exceeded`), and the idle release of sessions that do not hold the lease (a durable deadline).
 */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let other: TestEnvironment;
const people = new Map<string, RuntimePerson>();
const CAP = 3;
const IDLE_S = 120;
const settings = {
  RUNTIME_SESSIONS_PER_ENVIRONMENT: String(CAP),
  RUNTIME_SESSION_IDLE_SECONDS: String(IDLE_S),
  // Leases that never lapse here, so an active session stays active however far the clock moves.
  RUNTIME_LEASE_TTL_SECONDS: '3600',
  RUNTIME_EVICTIONS_PER_MINUTE: '1000',
};

const lifecycle = withTestServer(test, (started) => ({ db, server } = started), productParts, settings, clock);
test.before(async () => {
  await runtimePerson(server, 'owner-oz');
  env = await testEnvironment(server.opsUrl, 'limits-world', 'owner-oz');
  other = await testEnvironment(server.opsUrl, 'limits-other', 'owner-oz');
  // Everyone enrols before the clock moves (enrolment signs with real time); later their devices sign with the clock.
  for (const handle of ['kim', 'lee', 'max', 'ned', 'ola', 'pia', 'quin', 'ria']) {
    const p = await runtimePerson(server, handle);
    p.device.now = () => clock.now();
    people.set(handle, p);
  }
});

/** A person enrolled before the tests, whose device signs with the test clock. */
async function person(handle: string): Promise<RuntimePerson> {
  return people.get(handle)!;
}

/** `count` pages of `who` in `where`, each with a standby session. */
async function standbyPages(who: RuntimePerson, where: TestEnvironment, count: number): Promise<RuntimeClient[]> {
  const pages: RuntimeClient[] = [];
  for (let i = 0; i < count; i++) {
    const page = await who.runtime(where);
    const created = await page.createSession();
    assert.is(created.status, 201, await created.clone().text());
    pages.push(page);
  }
  return pages;
}

test('at most CAP live sessions per person and Environment: the next is 429 with Retry-After; a release makes room', async () => {
  const kim = await person('kim');
  const pages = await standbyPages(kim, env, CAP);
  await pages[0]!.activate();
  const extra = await kim.runtime(env);
  const refused = await extra.createSession();
  await assertProblem(refused, 429, 'runtime_session_quota_exceeded');
  // The soonest idle session (the second, on standby since its creation a moment ago) is released in about IDLE_S.
  const retryAfter = Number(refused.headers.get('retry-after'));
  assert.ok(retryAfter > IDLE_S - 10 && retryAfter <= IDLE_S, `Retry-After ${retryAfter}`);

  // Per Environment and per person: another Environment, and another person, still have room.
  assert.is((await (await kim.runtime(other)).createSession()).status, 201);
  assert.is((await (await (await person('lee')).runtime(env)).createSession()).status, 201);

  // A released session no longer counts (the active one here: its lease is freed too).
  assert.is((await pages[0]!.release()).status, 200);
  assert.is((await extra.createSession()).status, 201);
  await assertProblem(await (await kim.runtime(env)).createSession(), 429, 'runtime_session_quota_exceeded');
});

test('creations racing for the places: exactly CAP succeed, however many arrive together', async () => {
  const max = await person('max');
  const pages = await Promise.all(Array.from({ length: CAP * 3 }, () => max.runtime(env)));
  const answers = await Promise.all(pages.map((page) => page.createSession()));
  const statuses = answers.map((res) => res.status).sort();
  assert.equal(statuses, [...Array<number>(CAP).fill(201), ...Array<number>(CAP * 2).fill(429)]);
});

test('a standby session nobody activates is released once idle: its control channel is told, its place frees', async () => {
  const ned = await person('ned');
  const pages = await standbyPages(ned, env, CAP);
  const idle = pages[0]!;
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(idle)), env.origin);
  assert.is((await control.next('session.activity')).status, 'standby');

  clock.advance(IDLE_S * 1000 - 1_000);
  assert.is(await sessionState(idle), 'standby', 'not before its idle time');
  clock.advance(1_000);
  const told = await waitFor(() => control.messages.find((m) => m.reason === 'idle_expired'), 'the idle release on the control channel');
  assert.is(told.status, 'released');
  assert.is((await control.closed).code, 4410);
  assert.is(await sessionState(idle), 'ended');
  await assertProblem(await idle.activate(), 409, 'runtime_session_ended');
  // Released again by its page: answers the same, and frees nothing more.
  assert.is((await idle.release()).status, 200);

  // Every one of the three idled out together: the person has all the places again.
  await waitFor(async () => ((await sessionState(pages[2]!)) === 'ended' ? true : undefined), 'the others to be released');
  const again = await standbyPages(ned, env, CAP);
  assert.is(again.length, CAP);
});

test('an ended session leaves no browser index row, released by its page or idled out; a live one keeps its row', async () => {
  const ria = await person('ria');
  const [released, idled, live] = await standbyPages(ria, other, 3);
  assert.is((await live!.activate()).status, 200, 'an active session never idles out');
  const rows = async (page: RuntimeClient): Promise<number> =>
    (await db.connection.db.selectFrom('runtime_session_browsers').select('session_id').where('session_id', '=', page.sessionId!).execute()).length;
  assert.equal([await rows(released!), await rows(idled!), await rows(live!)], [1, 1, 1]);

  assert.is((await released!.release()).status, 200);
  await waitFor(async () => ((await rows(released!)) === 0 ? true : undefined), "the released session's row to go");
  clock.advance(IDLE_S * 1000);
  await waitFor(async () => ((await rows(idled!)) === 0 ? true : undefined), "the idled-out session's row to go");
  assert.is(await rows(live!), 1);

  // The row that stayed is what a logout finds: the live session is revoked by it.
  assert.is((await logoutBrowser(server.url, ria)).status, 200);
  const inspected = (await (await fetch(`${server.opsUrl}/actors/runtime-session/${live!.sessionId}`)).json()) as { persisted: { snapshot: { value: string } } };
  assert.is(inspected.persisted.snapshot.value, 'revoked');
});

test('holding the lease stops the idle clock; losing it to another session starts it', async () => {
  const ola = await person('ola');
  const a = await (await ola.runtime(env)).open();
  clock.advance(IDLE_S * 1000 * 2);
  assert.is(await sessionState(a), 'active', 'an active session never idles out');

  const b = await (await ola.runtime(env)).open();
  assert.is(await sessionState(a), 'superseded');
  clock.advance(IDLE_S * 1000 - 15_000);
  assert.is(await sessionState(a), 'superseded', 'idle since it lost the lease, not since it was created');
  clock.advance(10_000);
  // Too close to its deadline to be activated: the activation could finish after the session ended.
  await assertProblem(await a.activate(), 409, 'runtime_session_ended');
  assert.is(await sessionState(b), 'active', 'and the live Runtime keeps its lease');
  clock.advance(5_000);
  await waitFor(async () => ((await sessionState(a)) === 'ended' ? true : undefined), 'the superseded session to be released');
  assert.is(await sessionState(b), 'active');
});

test('creating and releasing in a loop is rate limited per person: 60 a minute, in bursts of 60', async () => {
  const quin = await person('quin');
  const page = await quin.runtime(env);
  for (let i = 0; i < 60; i++) {
    assert.is((await page.createSession()).status, 201, `creation ${i}`);
    assert.is((await page.release()).status, 200);
  }
  const limited = await page.createSession();
  assert.is(limited.status, 429, await limited.clone().text());
  assert.is(((await limited.json()) as { code: string }).code, 'rate_limited');
  assert.is(limited.headers.get('retry-after'), '1');
  // Across Environments too: the limit is the account's.
  assert.is((await (await quin.runtime(other)).createSession()).status, 429);
  clock.advance(1_000);
  assert.is((await page.createSession()).status, 201, 'one more a second later');
});

test('the idle deadline is durable: a server started again on the same database releases the session on time', async () => {
  const pia = await person('pia');
  const [page] = await standbyPages(pia, env, 1);
  await lifecycle.restart();
  // The new server listens elsewhere: the same device signs in afresh there, and the page names its old session.
  const browser = new RegistryBrowser(server.url, pia.device);
  assert.is((await browser.openPageSession()).status, 204);
  const token = (await environmentSignIn(server.url, browser, env.clientId, env.redirectUri)).access_token;
  const reborn = new RuntimeClient(server.url, token, env.origin);
  reborn.sessionId = page!.sessionId;
  assert.is(await sessionState(reborn), 'standby');
  clock.advance(IDLE_S * 1000);
  await waitFor(async () => ((await sessionState(reborn)) === 'ended' ? true : undefined), 'the idle release after the restart');
});

test.run();
