import { randomBytes } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import type { HostObserver } from '../../actors/actor-host.js';
import { defineActorKind } from '../../actors/actor-kind.js';
import type { StopReason } from '../../actors/activation.js';
import { ManualClock, systemClock } from '../../actors/clock.js';
import { ActorEventRejectedError } from '../../actors/errors.js';
import { productParts } from '../../server/main.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { hostFor, recordingLogger } from '../support/host.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Reading an actor that was never created (a key the store holds nothing for) must not keep an activation in memory:
 * such keys can come from strangers. First the host's rule, then the two product paths that reach it with keys the
 * caller chooses: the `kid` of an unauthenticated device assertion, and a signed-in caller's made-up session ids.
 */
let db: TestDatabase;
let store: PostgresActorStore;
let server: Awaited<ReturnType<typeof startTestServer>>;
let env: TestEnvironment;
let eve: RuntimePerson;

test.before(async () => {
  db = await createTestDatabase();
  store = new PostgresActorStore(db.connection);
  server = await startTestServer(db.url, productParts);
  eve = await runtimePerson(server, 'eve');
  env = await testEnvironment(server.opsUrl, 'eves-world', 'eve');
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

const add = (amount: number) => ({ type: 'counter.add', amount });
/** The counter ignores this in its initial state: a read. */
const read = { type: 'timer.due', name: 'nothing', dueAt: 0 };
const totalOf = (snapshot: unknown): number => (snapshot as { context: { total: number } }).context.total;

function stops(): HostObserver & { reasons: StopReason[] } {
  const reasons: StopReason[] = [];
  return {
    reasons,
    activated: () => {},
    deactivated: (_kind, reason) => void reasons.push(reason),
    eventAccepted: () => {},
    batchCommitted: () => {},
    batchFailed: () => {},
  };
}

test('a read of an actor never created answers with the initial state, writes nothing and leaves no activation', async () => {
  const observer = stops();
  const logger = recordingLogger();
  const host = hostFor(store, systemClock, [counterKind], { observer, logger });
  const reply = await host.send('counter', 'never-created', read);
  assert.is(reply.changed, false);
  assert.is(reply.version, 0);
  assert.is(totalOf(reply.snapshot), 0);
  assert.is(host.inspect('counter', 'never-created'), undefined, 'the activation left memory with its reply');
  assert.is(host.liveCount, 0);
  assert.equal(observer.reasons, ['nothing_stored']);
  assert.equal(logger.entries, [], 'leaving for this reason is ordinary, not a warning');
  assert.is(await store.load('counter', 'never-created'), undefined);
  await host.drain();
});

test('an event a never-created actor refuses leaves no activation either', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  await rejects(() => host.send('counter', 'refused-unborn', { type: 'counter.poison' }), (e: unknown) => e instanceof ActorEventRejectedError);
  assert.is(host.liveCount, 0);
  assert.is(await store.load('counter', 'refused-unborn'), undefined);
  await host.drain();
});

test('reads and a write queued while a new actor loads are answered in order, and the write keeps it live', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  const replies = await Promise.all([
    host.send('counter', 'born-while-loading', read),
    host.send('counter', 'born-while-loading', add(4)),
    host.send('counter', 'born-while-loading', read),
  ]);
  assert.equal(replies.map((r) => [r.version, totalOf(r.snapshot)]), [[0, 0], [1, 4], [1, 4]]);
  assert.ok(host.inspect('counter', 'born-while-loading'), 'an actor that wrote stays until passivation');
  assert.is((await store.load('counter', 'born-while-loading'))?.version, 1);
  await host.drain();
});

test('an actor the store holds stays in memory after a read, as before', async () => {
  const writer = hostFor(store, systemClock, [counterKind]);
  await writer.send('counter', 'stored-then-read', add(2));
  await writer.drain();
  const host = hostFor(store, systemClock, [counterKind]);
  const reply = await host.send('counter', 'stored-then-read', read);
  assert.is(totalOf(reply.snapshot), 2);
  assert.ok(host.inspect('counter', 'stored-then-read'));
  await host.drain();
});

test('a node that read an actor before another node created it sees the creation on its next read', async () => {
  const here = hostFor(store, systemClock, [counterKind]);
  const there = hostFor(store, systemClock, [counterKind]);
  assert.is((await here.send('counter', 'created-elsewhere', read)).version, 0);
  await there.send('counter', 'created-elsewhere', add(9));
  const after = await here.send('counter', 'created-elsewhere', read);
  assert.is(after.version, 1);
  assert.is(totalOf(after.snapshot), 9);
  // And it may write after it: its epoch is above the one the other node stored.
  assert.is((await here.send('counter', 'created-elsewhere', add(1))).version, 2);
  await there.drain();
  await here.drain();
});

/** A kind whose initial state already holds a deadline (none of the product's do): it must not lose that timer. */
const DUE_AT = Date.parse('2026-01-01T00:01:00Z');
const alarmKind = defineActorKind({
  name: 'alarm',
  machine: setup({
    types: { context: {} as { deadline: number | null }, events: {} as { type: 'timer.due'; name: string; dueAt: number; at: number } | { type: 'alarm.read'; at: number } },
  }).createMachine({
    id: 'alarm',
    context: { deadline: DUE_AT },
    initial: 'waiting',
    states: {
      waiting: { on: { 'timer.due': { target: 'rang', actions: assign({ deadline: null }) } } },
      rang: {},
    },
  }),
  key: { pattern: /^[a-z-]{1,32}$/, describe: 'lower-case name' },
  timers: (snapshot): Record<string, number> => (snapshot.context.deadline === null ? {} : { ring: snapshot.context.deadline }),
});

test('a never-created actor whose initial state holds a deadline stays live, and its timer fires', async () => {
  const clock = new ManualClock();
  const host = hostFor(store, clock, [alarmKind]);
  await host.send('alarm', 'initial-deadline', { type: 'alarm.read' });
  assert.equal(host.inspect('alarm', 'initial-deadline')?.timers, { ring: new Date(DUE_AT).toISOString() });
  clock.advance(60_000);
  await waitFor(async () => ((await store.load('alarm', 'initial-deadline'))?.snapshot as { value: string } | undefined)?.value === 'rang' || undefined, 'the alarm to ring');
  await host.drain();
});

const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';
const randomId = (prefix: string): string => `${prefix}_${Array.from(randomBytes(26), (b) => BASE32[b % 32]).join('')}`;
const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

test('device assertions naming unknown devices leave no actor activations behind (no credential needed)', async () => {
  const liveDevices = (): number => server.services.host.list('device').length;
  const before = liveDevices();
  const junk = 300;
  for (let i = 0; i < junk; i++) {
    const header = b64({ alg: 'ES256', typ: 'device-assertion+jwt', kid: randomId('dev') });
    const res = await fetch(`${server.url}/v1/account/devices`, { headers: { 'platform-device-assertion': `${header}.${b64({})}.AAAA` } });
    assert.is(res.status, 401);
    const body = (await res.json()) as { code: string };
    assert.is(body.code, 'device_unknown');
  }
  const after = liveDevices();
  // Before the fix each refused request activated a `device` actor for a key the stranger chose, kept for ACTOR_PASSIVATE_AFTER_MS.
  assert.ok(after - before < junk / 10, `${after - before} device actors live after ${junk} unauthenticated junk assertions`);
});

test('session ids a caller makes up leave no runtime-session actors in memory', async () => {
  const page = await eve.runtime(env);
  const live = (): number => server.services.host.list('runtime-session').length;
  const before = live();
  const guesses = 300;
  for (let i = 0; i < guesses; i++) {
    page.sessionId = randomId('rts');
    const res = await page.read();
    assert.is(res.status, 404);
    assert.is(((await res.json()) as { code: string }).code, 'runtime_session_not_found');
  }
  const added = live() - before;
  assert.ok(added < guesses / 10, `${added} runtime-session actors live after ${guesses} reads of session ids that do not exist`);
});

test.run();
