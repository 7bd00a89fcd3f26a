import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertProblem } from '../support/identity.js';
import { runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** Runtime sessions through HTTP: token and origin refusals, ownership, activation races, eviction quota, release. */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let other: TestEnvironment;
let erin: RuntimePerson;
let finn: RuntimePerson;
const EVICTIONS_PER_MINUTE = 4;

withTestServer(test, (started) => ({ db, server } = started), productParts, { RUNTIME_EVICTIONS_PER_MINUTE: String(EVICTIONS_PER_MINUTE) }, clock);
test.before(async () => {
  erin = await runtimePerson(server, 'erin');
  finn = await runtimePerson(server, 'finn');
  env = await testEnvironment(server.opsUrl, 'erins-world', 'erin');
  other = await testEnvironment(server.opsUrl, 'other-world', 'finn');
});

type Session = { sessionId: string; status: string; lease: { leaseId: string; leaseVersion: number } | null; environmentRoles: string[]; environmentRoleCatalog: unknown[]; actorId: string; origin: string };
const sessionOf = async (res: Response): Promise<Session> => (await jsonOf(res)) as unknown as Session;

test('refusals of the token and the origin come first, as Problems', async () => {
  const token = await erin.token(env);
  const create = (headers: Record<string, string>) => fetch(`${server.url}/v1/runtime/session`, { method: 'POST', headers });
  await assertProblem(await create({ origin: env.origin }), 401, 'runtime_token_invalid');
  await assertProblem(await create({ origin: env.origin, authorization: 'Bearer not.a.token' }), 401, 'runtime_token_invalid');
  // An ID token is signed by the same registry key but is not a runtime access token.
  await assertProblem(await create({ origin: env.origin, authorization: `Bearer ${token.split('.').reverse().join('.')}` }), 401, 'runtime_token_invalid');
  await assertProblem(await create({ authorization: `Bearer ${token}` }), 400, 'runtime_origin_required');
  await assertProblem(await create({ authorization: `Bearer ${token}`, origin: other.origin }), 403, 'runtime_origin_mismatch');
  await assertProblem(await create({ authorization: `Bearer ${token}`, origin: 'https://evil.example' }), 403, 'runtime_origin_mismatch');
  // The desktop shell's world address of the same Environment is its origin too.
  const world = await create({ authorization: `Bearer ${token}`, origin: `platform-env://${env.environmentId}` });
  assert.is(world.status, 201, await world.clone().text());
  assert.is((await sessionOf(world)).origin, `platform-env://${env.environmentId}`);

  // An expired token: the authorization ended, which the page fixes by signing in again.
  const stale = await erin.token(env);
  clock.advance(11 * 60_000);
  await assertProblem(await create({ authorization: `Bearer ${stale}`, origin: env.origin }), 401, 'runtime_authorization_expired');
});

test('a session belongs to one person, Environment and origin: anyone else gets 404', async () => {
  const mine = await erin.runtime(env);
  assert.is((await mine.createSession()).status, 201);
  const read = (client: RuntimeClient) => client.read();

  const theirs = await finn.runtime(env);
  theirs.sessionId = mine.sessionId;
  await assertProblem(await read(theirs), 404, 'runtime_session_not_found');
  const elsewhere = new RuntimeClient(server.url, await erin.token(other), other.origin);
  elsewhere.sessionId = mine.sessionId;
  await assertProblem(await read(elsewhere), 404, 'runtime_session_not_found');
  const world = new RuntimeClient(server.url, mine.accessToken, `platform-env://${env.environmentId}`);
  world.sessionId = mine.sessionId;
  await assertProblem(await read(world), 404, 'runtime_session_not_found');
  const forged = new RuntimeClient(server.url, mine.accessToken, env.origin);
  forged.sessionId = 'rts_00000000000000000000000000';
  await assertProblem(await read(forged), 404, 'runtime_session_not_found');
  forged.sessionId = 'not-a-session';
  await assertProblem(await read(forged), 404, 'runtime_session_not_found');
  await assertProblem(await fetch(`${server.url}/v1/runtime/session`, { headers: { authorization: `Bearer ${mine.accessToken}`, origin: env.origin } }), 400, 'runtime_session_required');

  // Only an active session reads itself (the control token is a standby session's one read).
  await assertProblem(await read(mine), 409, 'runtime_session_standby');
  assert.is((await mine.activate()).status, 200);
  const body = await sessionOf(await read(mine));
  assert.is(body.status, 'active');
  assert.is(body.lease?.leaseId, mine.lease!.leaseId);
  assert.equal(body.environmentRoles, ['admin'], 'erin owns the Environment');
  assert.equal(body.environmentRoleCatalog, [{ key: 'admin', scope: 'scoped', derived: true }]);
  assert.match(body.actorId, /^act_/);
  const finnSession = await (await finn.runtime(env)).open();
  assert.equal((await sessionOf(await finnSession.read())).environmentRoles, [], 'finn does not own it');
});

test('activation: exactly one of two racing sessions ends active, the other superseded, every time', async () => {
  for (let round = 0; round < 3; round++) {
    const a = await erin.runtime(env);
    const b = await erin.runtime(env);
    await a.createSession();
    await b.createSession();
    const [ra, rb] = await Promise.all([a.activate(), b.activate()]);
    assert.is(ra.status, 200, await ra.clone().text());
    assert.is(rb.status, 200, await rb.clone().text());
    const states = [await sessionState(a), await sessionState(b)].sort();
    assert.equal(states, ['active', 'superseded'], `round ${round}`);
    assert.is.not(a.lease!.leaseVersion, b.lease!.leaseVersion, 'each holder got its own version');
    // Recover the quota: racing pairs evict.
    clock.advance(60_000);
  }
});

test('lease versions only grow; a superseded session may activate again; the holder re-activating keeps its fence', async () => {
  const a = await (await erin.runtime(env)).open();
  const first = a.lease!;
  assert.ok((await a.activate()).status === 200);
  assert.equal(a.lease, first, 'activating the holder again returns its lease');
  const b = await (await erin.runtime(env)).open();
  assert.ok(b.lease!.leaseVersion > first.leaseVersion);
  await assertProblem(await a.read(), 409, 'runtime_session_superseded');
  assert.ok((await a.activate()).status === 200, 'superseded sessions may activate');
  assert.ok(a.lease!.leaseVersion > b.lease!.leaseVersion);
  assert.is(await sessionState(b), 'superseded');
  clock.advance(60_000);
});

test('eviction quota: per person across Environments; over it, 429 before the lease actor is touched; activations that evict nobody pass', async () => {
  const a = await (await erin.runtime(env)).open();
  // b is in another Environment, where Erin has another pairwise id: the quota is the person's (the private
  // principal's), so evictions across Environments count together.
  const b = await erin.runtime(other);
  await b.createSession();
  // Opening a evicted the session left holding the lease by the test before; from here a ⇄ b evict each other.
  let evictions = 1;
  let refused: Response | undefined;
  for (let i = 0; i < EVICTIONS_PER_MINUTE + 2 && !refused; i++) {
    const res = await (evictions % 2 === 1 ? b : a).activate();
    if (res.status === 429) refused = res;
    else {
      assert.is(res.status, 200, await res.clone().text());
      evictions++;
    }
  }
  assert.is(evictions, EVICTIONS_PER_MINUTE);
  assert.ok(refused);
  await assertProblem(refused, 429, 'runtime_eviction_quota_exceeded');
  assert.ok(Number(refused.headers.get('retry-after')) >= 1);

  // Proof the coordination store was not touched: the lease actor's journal and stored version stay as they were, and
  // neither the actor host (session or lease actor, live or stored) nor its store is asked anything while refusing.
  const journal = () => db.connection.db.selectFrom('actor_journal').select(db.connection.db.fn.countAll<string>().as('n')).where('kind', '=', 'runtime-lease').executeTakeFirstOrThrow();
  const stored = () => db.connection.db.selectFrom('actor_snapshots').select(['version']).where('kind', '=', 'runtime-lease').where('key', '=', erin.accountId).executeTakeFirstOrThrow();
  const before = { journal: (await journal()).n, version: (await stored()).version, live: server.services.host.inspect('runtime-lease', erin.accountId)?.version };
  const asked = countCalls([server.services.host, ['send', 'peekCommitted']], [server.services.store, ['load', 'commit']]);
  try {
    for (let i = 0; i < 5; i++) await assertProblem(await (evictions % 2 === 1 ? b : a).activate(), 429, 'runtime_eviction_quota_exceeded');
  } finally {
    asked.restore();
  }
  // The account actor answers the token's epoch check (identity, before any Runtime state); nothing else is asked.
  assert.equal(asked.calls.filter((call) => call !== 'peekCommitted(account)'), [], 'the refusals asked the Runtime actors and the store nothing');
  assert.equal({ journal: (await journal()).n, version: (await stored()).version, live: server.services.host.inspect('runtime-lease', erin.accountId)?.version }, before);

  // The holder activating again evicts nobody, so it is never refused; nor is a fresh page when the lease is free.
  const holder = evictions % 2 === 1 ? a : b;
  assert.is((await holder.activate()).status, 200);
  assert.is((await holder.release()).status, 200);
  const fresh = await erin.runtime(env);
  await fresh.createSession();
  assert.is((await fresh.activate()).status, 200, 'the lease was free: nobody evicted');

  clock.advance(60_000);
  const loser = evictions % 2 === 1 ? b : a;
  assert.is((await loser.activate()).status, 200, 'a minute later the quota has refilled');
  clock.advance(60_000);
});

test('eviction quota: activations arriving together cannot all pass on the same tokens', async () => {
  const holder = await (await erin.runtime(env)).open();
  const rivals = await Promise.all(Array.from({ length: EVICTIONS_PER_MINUTE + 3 }, () => erin.runtime(env)));
  for (const rival of rivals) await rival.createSession();
  // The test before left the quota refilled; the holder's own activation evicted whoever held the lease then.
  clock.advance(60_000);
  const versionBefore = holder.lease!.leaseVersion;
  const answers = await Promise.all(rivals.map((rival) => rival.activate()));
  const statuses = answers.map((res) => res.status).sort();
  const passed = statuses.filter((status) => status === 200).length;
  assert.is(passed, EVICTIONS_PER_MINUTE, `each of ${EVICTIONS_PER_MINUTE} tokens pays for one eviction: ${statuses.join(',')}`);
  assert.is(statuses.filter((status) => status === 429).length, rivals.length - EVICTIONS_PER_MINUTE);
  const versions = rivals.filter((_, i) => answers[i]!.status === 200).map((rival) => rival.lease!.leaseVersion);
  assert.is(Math.max(...versions), versionBefore + EVICTIONS_PER_MINUTE, 'the lease moved exactly once per admitted activation');
  const active = await Promise.all([holder, ...rivals].map(sessionState));
  assert.is(active.filter((status) => status === 'active').length, 1);
  clock.advance(60_000);
});

/** Records calls of the named methods of each object, passing them through; `restore` puts the methods back. */
function countCalls(...targets: Array<[object, string[]]>): { calls: string[]; restore(): void } {
  const calls: string[] = [];
  const restores: Array<() => void> = [];
  for (const [target, names] of targets) {
    const record = target as Record<string, unknown>;
    for (const name of names) {
      const original = record[name] as (...args: unknown[]) => unknown;
      const own = Object.prototype.hasOwnProperty.call(record, name);
      restores.push(() => (own ? (record[name] = original) : delete record[name]));
      record[name] = function (this: unknown, ...args: unknown[]) {
        calls.push(`${name}(${String(args[0])})`);
        return original.apply(this, args);
      };
    }
  }
  return { calls, restore: () => restores.forEach((restore) => restore()) };
}

test('release ends the session for good and frees the lease without evicting anyone', async () => {
  const a = await (await erin.runtime(env)).open();
  const released = await a.release();
  assert.is(released.status, 200);
  assert.is((await sessionOf(released)).status, 'released');
  assert.is((await a.release()).status, 200, 'releasing again answers the same');
  await assertProblem(await a.activate(), 409, 'runtime_session_ended');
  await assertProblem(await a.controlToken(), 409, 'runtime_session_ended');
  await assertProblem(await a.read(), 409, 'runtime_session_ended');
});

test('the control token is open to standby and superseded sessions', async () => {
  const a = await erin.runtime(env);
  await a.createSession();
  const standby = await a.controlToken();
  assert.is(standby.status, 200, await standby.clone().text());
  const body = await jsonOf(standby);
  assert.is(body.tokenType, 'Bearer');
  assert.is(body.channel, '/v1/runtime/control');
  assert.is(body.expiresIn, 300);
  await a.activate();
  await (await erin.runtime(env)).open();
  assert.is(await sessionState(a), 'superseded');
  assert.is((await a.controlToken()).status, 200);
  // The control token is no runtime access token.
  const misuse = new RuntimeClient(server.url, String(body.controlToken), env.origin);
  await assertProblem(await misuse.createSession(), 401, 'runtime_token_invalid');
  clock.advance(60_000);
});

test.run();
