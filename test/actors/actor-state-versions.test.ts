import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { assign, setup } from 'xstate';
import { defineActorKind, storedState, type ActorKind, type ActorStateUpgrade } from '../../actors/actor-kind.js';
import { systemClock } from '../../actors/clock.js';
import { ActorRestoreError } from '../../actors/errors.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';

/**
 * Per-kind state versions (ActorKind.stateVersion, upgrades): every snapshot row and journal segment records the
 * version it was written at; loading brings each up to the kind's through its steps before replaying, and refuses what
 * a newer build wrote or what a step throws on, saying why in the operator view.
 */
let db: TestDatabase;
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ db, store } = opened));

const key = { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' };
// A snapshot only with an activation's first write: what follows stays in the journal, replayed on load.
const policy = { snapshotEvery: 1_000 };

/** Version 1: `add` adds `amount`; the context is a `total`. */
type V1Event = { type: 'add'; amount: number; at: number };
const v1 = setup({ types: { context: {} as { total: number }, events: {} as V1Event } }).createMachine({
  id: 'tally',
  context: { total: 0 },
  on: { add: { actions: assign({ total: ({ context, event }) => context.total + event.amount }) } },
});
const v1Kind = defineActorKind({ name: 'tally', machine: v1, key, policy });

/** Version 2: `add` is `plus` with `cents`, and the context keeps cents and when the tally was first stored. */
type V2Event = { type: 'plus'; cents: number; at: number };
const v2 = setup({ types: { context: {} as { cents: number; since: number | null }, events: {} as V2Event } }).createMachine({
  id: 'tally',
  context: { cents: 0, since: null },
  on: { plus: { actions: assign({ cents: ({ context, event }) => context.cents + event.cents }) } },
});
const seen: { snapshots: Array<{ version: number; storedAt: number }>; events: Array<{ version: number; at: number }> } = { snapshots: [], events: [] };
const toCents: ActorStateUpgrade = {
  name: 'totals in cents',
  snapshot: (snapshot, stored) => {
    seen.snapshots.push({ version: stored.version, storedAt: stored.storedAt });
    const { total, ...context } = storedState(snapshot).context;
    return { ...storedState(snapshot), context: { ...context, cents: (total as number) * 100, since: stored.storedAt } };
  },
  event: (event, stored) => {
    seen.events.push({ version: stored.version, at: stored.at });
    const { amount, ...rest } = event as V1Event;
    return { ...rest, type: 'plus', cents: amount * 100 };
  },
};
const v2Kind = defineActorKind({ name: 'tally', machine: v2, key, policy, stateVersion: 2, upgrades: [toCents] });

async function send(kind: ActorKind, actor: string, events: readonly object[]): Promise<void> {
  const host = hostFor(store, systemClock, [kind]);
  for (const event of events) await host.send('tally', actor, event as { type: string });
  await host.drain();
}

async function versionsStored(actor: string): Promise<{ snapshot: number | undefined; segments: number[] }> {
  const row = await db.connection.db.selectFrom('actor_snapshots').select('state_version').where('key', '=', actor).executeTakeFirst();
  const segments = await db.connection.db.selectFrom('actor_journal').select('state_version').where('key', '=', actor).orderBy('version').execute();
  return { snapshot: row?.state_version, segments: segments.map((s) => s.state_version) };
}

/** What a build with `kind` makes of the actor: a write's fate and the operator view's reason. */
async function readBy(kind: ActorKind, actor: string, event: object): Promise<{ sent: string; reason: string | undefined }> {
  const host = hostFor(store, systemClock, [kind]);
  const sent = await host.send('tally', actor, event as { type: string }).then(
    () => 'restored',
    (error: unknown) => (error instanceof ActorRestoreError && !error.retryable ? 'restore failed' : String(error)),
  );
  const view = await host.inspectStored('tally', actor);
  await host.drain();
  return { sent, reason: view?.restores === false ? view.reason : undefined };
}

test('writes record the kind state version on the snapshot row and on every journal segment (1 unless declared)', async () => {
  await send(v1Kind, 'v1-writes', [{ type: 'add', amount: 1 }, { type: 'add', amount: 2 }]);
  assert.equal(await versionsStored('v1-writes'), { snapshot: 1, segments: [1, 1] });
  await send(v2Kind, 'v2-writes', [{ type: 'plus', cents: 1 }, { type: 'plus', cents: 2 }]);
  assert.equal(await versionsStored('v2-writes'), { snapshot: 2, segments: [2, 2] });
});

test('an older snapshot and older journaled events are upgraded, each from its own version, before they are replayed', async () => {
  // Version 1 stored the snapshot with the first add and journaled the second after it.
  await send(v1Kind, 'older', [{ type: 'add', amount: 3 }, { type: 'add', amount: 4 }]);
  await sql`UPDATE actor_snapshots SET updated_at = '2026-01-02T03:04:05.678Z' WHERE key = 'older'`.execute(db.connection.db);
  const journaledAt = (await store.load('tally', 'older'))!.tail[0]!.at;
  seen.snapshots = [];
  seen.events = [];

  const host = hostFor(store, systemClock, [v2Kind]);
  const reply = await host.send('tally', 'older', { type: 'plus', cents: 5 });
  assert.equal(reply.snapshot.context, { cents: 705, since: Date.parse('2026-01-02T03:04:05.678Z') });
  assert.equal(seen.snapshots, [{ version: 1, storedAt: Date.parse('2026-01-02T03:04:05.678Z') }], 'the step is given the row stored time');
  assert.equal(seen.events, [{ version: 2, at: journaledAt }], 'and each event its own time');
  await host.drain();
  // This activation's first write stored the upgraded state at version 2; the segments keep the version they were written at.
  assert.equal(await versionsStored('older'), { snapshot: 2, segments: [1, 1, 2] });

  // A version 1 segment after a version 2 snapshot (a node of the older build wrote last) replays upgraded too.
  const stored = (await store.load('tally', 'older'))!;
  const at = systemClock.now();
  await store.commit([{ kind: 'tally', key: 'older', baseVersion: 3, epoch: stored.epoch, journal: [{ version: 4, event: { type: 'add', amount: 1, at }, at }] }]);
  const view = await hostFor(store, systemClock, [v2Kind]).readCommitted('tally', 'older');
  assert.equal((view?.state as { context: unknown }).context, { cents: 805, since: Date.parse('2026-01-02T03:04:05.678Z') });
});

test('a snapshot a newer build wrote fails the restore, naming both versions, and nothing is written over it', async () => {
  await send(v2Kind, 'newer', [{ type: 'plus', cents: 1 }]);
  const { sent, reason } = await readBy(v1Kind, 'newer', { type: 'add', amount: 1 });
  assert.is(sent, 'restore failed', 'a rollback must not read cents as dollars');
  assert.match(reason ?? '', /snapshot at version 1 was written at state version 2 of tally, newer than this build's 1/);
  assert.is((await store.load('tally', 'newer'))?.version, 1);
});

test('a journal segment a newer build wrote after an older snapshot fails the restore too', async () => {
  await send(v1Kind, 'newer-tail', [{ type: 'add', amount: 1 }]);
  const stored = (await store.load('tally', 'newer-tail'))!;
  const at = systemClock.now();
  await store.commit([{ kind: 'tally', key: 'newer-tail', baseVersion: 1, epoch: stored.epoch, stateVersion: 2, journal: [{ version: 2, event: { type: 'plus', cents: 1, at }, at }] }]);
  const { sent, reason } = await readBy(v1Kind, 'newer-tail', { type: 'add', amount: 1 });
  assert.is(sent, 'restore failed');
  assert.match(reason ?? '', /journal entry at version 2 \(plus\) was written at state version 2 of tally, newer than this build's 1/);
});

test('a step that throws fails the restore, naming the step, and the operator view says so', async () => {
  const broken = defineActorKind({
    ...v2Kind,
    upgrades: [{ name: 'totals in cents', snapshot: () => { throw new Error('no total here'); } }],
  });
  await send(v1Kind, 'throws', [{ type: 'add', amount: 1 }]);
  const { sent, reason } = await readBy(broken, 'throws', { type: 'plus', cents: 1 });
  assert.is(sent, 'restore failed');
  assert.match(reason ?? '', /upgrade step 1→2 \(totals in cents\) of tally threw on the snapshot at version 1: no total here/);
  assert.equal(await versionsStored('throws'), { snapshot: 1, segments: [1] }, 'nothing was written over it');
});

test('a kind whose steps do not lead from 1 to its state version is refused where it is defined', () => {
  assert.throws(() => defineActorKind({ name: 'tally', machine: v2, key, stateVersion: 3, upgrades: [toCents] }), /stateVersion 3 needs 2 upgrade steps, has 1/);
  assert.throws(() => defineActorKind({ name: 'tally', machine: v2, key, upgrades: [toCents] }), /stateVersion 1 needs 0 upgrade steps, has 1/);
  assert.throws(() => defineActorKind({ name: 'tally', machine: v2, key, stateVersion: 0 }), /stateVersion must be a whole number from 1/);
});

test.run();
