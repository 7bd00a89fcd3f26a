import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import { defineActorKind } from '../../actors/actor-kind.js';
import type { HostObserver } from '../../actors/actor-host.js';
import { ManualClock, systemClock } from '../../actors/clock.js';
import { InProcessOwnership } from '../../actors/ownership.js';
import type { ActorStore } from '../../storage/actor-store.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, interceptCommits, recordingLogger, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/** Durable timers under races and load: stored timers follow the committed state (and stale ones are repaired), the poller is never starved, refused deliveries are retried, and ownership forgets what it need not keep. */
let db: TestDatabase;
let store: PostgresActorStore;

withActorStore(test, (opened) => ({ db, store } = opened));

const add = (amount: number) => ({ type: 'counter.add', amount });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const valueOf = (snapshot: unknown): string => (snapshot as { value: string }).value;

/** The real store, with commits that can be held in flight until released. */
function gated(inner: ActorStore) {
  let holding = false;
  let held: Array<() => void> = [];
  let heldWaiters: Array<() => void> = [];
  const s = interceptCommits(inner, async (entries, next) => {
    if (holding) {
      await new Promise<void>((resolve) => {
        held.push(resolve);
        for (const w of heldWaiters.splice(0)) w();
      });
    }
    return next(entries);
  });
  return {
    store: s,
    hold: () => void (holding = true),
    waitHeld: () => (held.length > 0 ? Promise.resolve() : new Promise<void>((r) => heldWaiters.push(r))),
    release: () => {
      holding = false;
      const h = held;
      held = [];
      for (const r of h) r();
    },
  };
}

function activations(): HostObserver & { count: number } {
  const o = {
    count: 0,
    activated: () => void o.count++,
    deactivated: () => {},
    eventAccepted: () => {},
    batchCommitted: () => {},
    batchFailed: () => {},
  };
  return o;
}

/** Makes `key` go armed -> expired while the arm's snapshot write is in flight (the deadline falls due meanwhile). */
async function racePast(host: ReturnType<typeof hostFor>, gate: ReturnType<typeof gated>, clock: ManualClock, keys: string[]): Promise<void> {
  await Promise.all(keys.map((k) => host.send('counter', k, add(1)))); // written this epoch; stored timers {}
  gate.hold();
  const armed = keys.map((k) => host.send('counter', k, { type: 'counter.arm', afterMs: 1_000 }));
  await gate.waitHeld(); // the batch holding the arm (with its snapshot, timers {deadline}) is in flight
  clock.advance(1_000); // the deadline falls due: timer.due is handled, state 'expired', timers {} again
  gate.release();
  await Promise.all(armed);
  for (const k of keys) {
    await waitFor(async () => (await store.load('counter', k))?.version === 3, `${k} to commit its timer.due`);
  }
}

test('stored durable timers match the committed state when timers change back while a snapshot write is in flight', async () => {
  const clock = new ManualClock();
  const gate = gated(store);
  const host = hostFor(gate.store, clock, [counterKind], { commitLanes: 1 });
  await racePast(host, gate, clock, ['phantom']);
  await host.drain();
  const stored = (await store.load('counter', 'phantom'))!;
  const again = hostFor(store, clock, [counterKind]);
  const replayed = await again.send('counter', 'phantom', { type: 'timer.due', name: 'none', dueAt: 0 });
  assert.is(valueOf(replayed.snapshot), 'expired', 'the committed state has no deadline any more');
  await again.drain();
  assert.equal(stored.timers, {}, `stored timers ${JSON.stringify(stored.timers)} (snapshot v${stored.snapshotVersion}, journal v${stored.version})`);
});

test('an actor whose state holds no timer is not re-activated by the timer poller again and again', async () => {
  // `phantom` from the previous test: its row keeps next_due_at although its state has no deadline.
  const clock = new ManualClock(Date.parse('2026-01-01T01:00:00Z'));
  const observer = activations();
  const host = hostFor(store, clock, [counterKind], { timerPollMs: 1_000, passivateAfterMs: 10_000, observer });
  host.start();
  for (let i = 0; i < 60; i++) {
    clock.advance(1_000);
    await sleep(25);
  }
  await host.drain();
  assert.is(observer.count, 0, `activated ${observer.count} times in 60 s without receiving any event`);
});

test('stored timers the state does not hold (an older build\'s row) are replaced on the first activation, which is the last', async () => {
  const clock = new ManualClock(Date.parse('2026-01-01T02:00:00Z'));
  const first = hostFor(store, clock, [counterKind]);
  await first.send('counter', 'stale-row', add(1));
  await first.drain();
  // What a row of the phantom-timer bug (or a kind whose machine dropped a deadline) looks like: a deadline stored
  // with a snapshot whose state has none.
  const due = new Date(clock.now() - 60_000);
  await db.connection.db
    .updateTable('actor_snapshots')
    .set({ timers: JSON.stringify({ deadline: due.getTime() }), next_due_at: due })
    .where('kind', '=', 'counter')
    .where('key', '=', 'stale-row')
    .execute();

  const observer = activations();
  const logger = recordingLogger();
  const host = hostFor(store, clock, [counterKind], { timerPollMs: 1_000, passivateAfterMs: 10_000, observer, logger });
  host.start();
  for (let i = 0; i < 60; i++) {
    clock.advance(1_000);
    await sleep(25);
  }
  await host.drain();
  const stored = (await store.load('counter', 'stale-row'))!;
  assert.equal(stored.timers, {}, 'the stored timers are those of the state');
  assert.is(observer.count, 1, `activated ${observer.count} times in 60 s for a deadline its state does not hold`);
  assert.ok(logger.entries.some((e) => e.message === 'stored timers replaced by those of the state'), 'the repair is logged');
  const row = await db.connection.db.selectFrom('actor_snapshots').select('next_due_at').where('key', '=', 'stale-row').executeTakeFirstOrThrow();
  assert.is(row.next_due_at, null);
});

test('control: with few rows due, a passivated actor\'s timer fires after a restart', async () => {
  const clock = new ManualClock(Date.parse('2026-01-01T12:00:00Z'));
  const first = hostFor(store, clock, [counterKind]);
  await first.send('counter', 'control-real', { type: 'counter.arm', afterMs: 5_000 });
  await first.drain();
  const later = new ManualClock(clock.now() + 60_000);
  const second = hostFor(store, later, [counterKind], { timerPollMs: 1_000 });
  second.start();
  try {
    await waitFor(async () => {
      later.advance(1_000);
      return valueOf((await store.load('counter', 'control-real'))?.snapshot) === 'expired';
    }, 'control-real to expire', 8_000);
  } finally {
    await second.drain();
  }
});

test('a due timer of a passivated actor fires even when many other rows are due earlier', async () => {
  const clock = new ManualClock(Date.parse('2026-01-02T00:00:00Z'));
  const gate = gated(store);
  const first = hostFor(gate.store, clock, [counterKind], { commitLanes: 1, passivateAfterMs: 3_600_000 });
  const phantoms = Array.from({ length: 1_000 }, (_, i) => `starve-${i}`);
  await racePast(first, gate, clock, phantoms);
  const real = await first.send('counter', 'starved-real', { type: 'counter.arm', afterMs: 5_000 });
  await first.drain();

  const later = new ManualClock(clock.now() + 60_000);
  const second = hostFor(store, later, [counterKind], { timerPollMs: 1_000, passivateAfterMs: 3_600_000 });
  second.start();
  try {
    await waitFor(async () => {
      later.advance(1_000);
      return valueOf((await store.load('counter', 'starved-real'))?.snapshot) === 'expired';
    }, `the deadline of starved-real (due ${new Date((real.snapshot.context as { deadline: number }).deadline).toISOString()}) to fire`, 8_000);
  } finally {
    await second.drain();
  }
});

test('a timer whose delivery was refused (actor overloaded) is delivered again while the actor stays live', async () => {
  const clock = new ManualClock(Date.parse('2026-01-03T00:00:00Z'));
  const gate = gated(store);
  const logger = recordingLogger();
  const host = hostFor(gate.store, clock, [{ ...counterKind, policy: { maxPendingEvents: 2 } }], {
    timerPollMs: 1_000,
    passivateAfterMs: 600_000,
    logger,
  });
  host.start();
  await host.send('counter', 'busy', { type: 'counter.arm', afterMs: 1_000 });
  gate.hold();
  const a = host.send('counter', 'busy', add(1));
  const b = host.send('counter', 'busy', add(1));
  await gate.waitHeld();
  clock.advance(1_000); // due now, but two events await their commit: the timer.due is refused as overloaded
  gate.release();
  await Promise.all([a, b]);
  assert.ok(logger.entries.some((e) => e.message === 'timer delivery failed'), 'the first delivery was refused');
  // The actor keeps working (one event a second); a minute passes.
  let last: Awaited<ReturnType<typeof host.send>> | undefined;
  for (let i = 0; i < 60; i++) {
    clock.advance(1_000);
    last = await host.send('counter', 'busy', add(1));
    await sleep(5);
  }
  await host.drain();
  assert.is(valueOf(last!.snapshot), 'expired', `deadline passed 60 s ago; state is still ${valueOf(last!.snapshot)}`);
});

/** A lease: each renewal moves its deadline a second on; a timer.due at or past the deadline lets it lapse. */
const leaseKind = defineActorKind({
  name: 'lease',
  machine: setup({
    types: {
      context: {} as { deadline: number | null },
      events: {} as { type: 'renew'; at: number } | { type: 'timer.due'; name: string; dueAt: number; at: number },
    },
  }).createMachine({
    context: { deadline: null },
    on: {
      renew: { actions: assign({ deadline: ({ event }) => event.at + 1_000 }) },
      'timer.due': { guard: ({ context, event }) => context.deadline !== null && event.at >= context.deadline, actions: assign({ deadline: null }) },
    },
  }),
  key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
  timers: (snapshot): Record<string, number> => (snapshot.context.deadline === null ? {} : { deadline: snapshot.context.deadline }),
});

test('an overdue timer found on load does not unarm the deadline an event queued behind the load moved', async () => {
  const clock = new ManualClock(Date.parse('2026-01-04T00:00:00Z'));
  const first = hostFor(store, clock, [leaseKind]);
  await first.send('lease', 'moved', { type: 'renew' });
  await first.drain();
  clock.advance(2_000); // the stored deadline is overdue when the next renewal loads the actor
  const host = hostFor(store, clock, [leaseKind]);
  const renewed = await host.send('lease', 'moved', { type: 'renew' });
  const deadline = (renewed.snapshot.context as { deadline: number }).deadline;
  await sleep(20); // the overdue timer's delivery (ignored: the lease was renewed) has run
  assert.equal(host.inspect('lease', 'moved')?.timers, { deadline: new Date(deadline).toISOString() }, 'the renewed deadline is armed');
  await host.drain();
  assert.is(clock.pendingTimers, 0, 'a clock timer of the passivated activation is left behind (and keeps it in memory)');
});

test('ownership forgets the epochs of activations that stopped without writing (no growth per key read)', async () => {
  const ownership = new InProcessOwnership();
  const host = hostFor(store, systemClock, [counterKind], { ownership });
  // Reads: events the machine ignores (as session.read / account.read are for the product's kinds).
  for (let i = 0; i < 3; i++) await host.send('counter', `read-only-${i}`, { type: 'timer.due', name: 'x', dueAt: 0 });
  await host.drain(); // all passivated, none written
  const epochs = await Promise.all([0, 1, 2].map((i) => ownership.claim('counter', `read-only-${i}`, 0)));
  assert.equal(epochs, [1, 1, 1], `the stopped, never-written activations are still remembered: next epochs ${epochs}`);
});

test.run();
