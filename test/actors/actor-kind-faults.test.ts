import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import { defineActorKind } from '../../actors/actor-kind.js';
import { systemClock } from '../../actors/clock.js';
import { ActorCommitFailedError, ActorEventRejectedError, ActorRestoreError } from '../../actors/errors.js';
import { rejects } from '../support/assert.js';
import { counterKind } from '../fixtures/counter.kind.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { hostFor, withActorStore } from '../support/host.js';

/**
 * Kind code the host runs while it builds a group commit (`ephemeral.forget`, `endedAt`, through snapshotForCommit):
 * a fault in it fails that actor's write only; the other actors of the batch commit, and nothing is left unhandled.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

type Context = { total: number; mood: string | null };
type Event = { type: 'add'; amount: number; at: number } | { type: 'mood'; mood: string; at: number };

const moodMachine = setup({ types: { context: {} as Context, events: {} as Event } }).createMachine({
  id: 'mood',
  context: { total: 0, mood: null },
  on: {
    add: { actions: assign({ total: ({ context, event }) => context.total + event.amount }) },
    mood: { actions: assign({ mood: ({ event }) => event.mood }) },
  },
});

/** A forget with a bug on one state (say, a shape it did not expect). */
const moodKind = defineActorKind({
  name: 'mood',
  machine: moodMachine,
  key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
  ephemeral: {
    events: new Set(['mood']),
    forget: (snapshot) => {
      if (snapshot.context.total === 13) throw new Error('forget cannot handle this state');
      return { ...snapshot, context: { ...snapshot.context, mood: null } };
    },
  },
});

test('a kind\'s forget throwing while its batch is built fails that actor\'s write only', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    // One lane, so both writes share a batch, as any two actors on one lane do under load.
    const host = hostFor(store, systemClock, [moodKind, counterKind], { commitLanes: 1 });
    const settle = <T>(p: Promise<T>) =>
      Promise.race([
        p.then(
          () => ({ outcome: 'resolved' }) as const,
          (e: unknown) => ({ outcome: e instanceof ActorCommitFailedError ? 'commit failed' : `rejected: ${String(e)}` }) as const,
        ),
        new Promise<{ outcome: 'pending' }>((r) => setTimeout(() => r({ outcome: 'pending' }), 3_000).unref()),
      ]);
    const bad = host.send('mood', 'bad', { type: 'add', amount: 13 });
    const innocent = host.send('counter', 'innocent', { type: 'counter.add', amount: 1 });
    const [badOutcome, innocentOutcome] = await Promise.all([settle(bad), settle(innocent)]);
    await host.drain();
    assert.equal(
      { innocent: innocentOutcome.outcome, faulty: badOutcome.outcome, unhandled: unhandled.map(String) },
      { innocent: 'resolved', faulty: 'commit failed', unhandled: [] },
      'an unrelated actor commits, the faulty one is answered, nothing is left unhandled',
    );
  } finally {
    // Let the rejection surface before the handler goes, so the runner is not killed by it.
    await new Promise((r) => setTimeout(r, 50));
    process.off('unhandledRejection', onUnhandled);
  }
});

/** An endedAt with a bug on one state: the host reads it while it handles an event, not only while it builds a batch. */
const endingKind = defineActorKind({
  name: 'ending',
  machine: moodMachine,
  key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
  endedAt: (snapshot) => {
    if (snapshot.context.total === 13) throw new Error('endedAt cannot handle this state');
    return null;
  },
});

/** A journalView with a bug on one event. */
const redactingKind = defineActorKind({
  name: 'redacting',
  machine: moodMachine,
  key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
  journalView: (event) => {
    if ((event as { amount?: number }).amount === 13) throw new Error('journalView cannot handle this event');
    return event;
  },
});

for (const [what, kind] of [['endedAt', endingKind], ['journalView', redactingKind]] as const) {
  test(`a kind's ${what} throwing while an event is handled refuses that event only: no version is lost, drain still ends`, async () => {
    const host = hostFor(store, systemClock, [kind]);
    const settle = <T>(p: Promise<T>) =>
      Promise.race([
        p.then(
          () => 'resolved',
          (e: unknown) => (e instanceof ActorEventRejectedError ? 'refused' : `rejected: ${String(e)}`),
        ),
        new Promise<string>((r) => setTimeout(() => r('pending'), 3_000).unref()),
      ]);
    assert.is((await host.send(kind.name, 'a', { type: 'add', amount: 0 })).version, 1);
    const faulty = await settle(host.send(kind.name, 'a', { type: 'add', amount: 13 }));
    const after = await settle(host.send(kind.name, 'a', { type: 'add', amount: 2 }));
    // Queued while the actor loads: the faulty event must not take the events after it down with it.
    const queued = await Promise.all([
      settle(host.send(kind.name, 'b', { type: 'add', amount: 13 })),
      settle(host.send(kind.name, 'b', { type: 'add', amount: 1 })),
    ]);
    const drained = await Promise.race([host.drain().then(() => 'drained'), new Promise<string>((r) => setTimeout(() => r('hung'), 3_000).unref())]);
    assert.equal(
      { faulty, after, queued, drained, a: (await store.load(kind.name, 'a'))?.version, b: (await store.load(kind.name, 'b'))?.version },
      { faulty: 'refused', after: 'resolved', queued: ['refused', 'resolved'], drained: 'drained', a: 2, b: 1 },
      'the faulty event is refused like a machine that throws; the events around it commit; nothing is left outstanding',
    );
  });
}

test("a kind's timers throwing on a stored state is that actor's restore failure, not a storage outage to retry for ever", async () => {
  const writer = hostFor(store, systemClock, [defineActorKind({ name: 'timed', machine: moodMachine, key: moodKind.key })]);
  await writer.send('timed', 'a', { type: 'add', amount: 13 });
  await writer.drain();
  // A later build whose timers() cannot read that state.
  const timed = defineActorKind({
    name: 'timed',
    machine: moodMachine,
    key: moodKind.key,
    timers: (snapshot): Record<string, number> => {
      if (snapshot.context.total === 13) throw new Error('timers cannot handle this state');
      return {};
    },
  });
  const host = hostFor(store, systemClock, [timed]);
  await rejects(
    () => host.send('timed', 'a', { type: 'add', amount: 1 }),
    (e: unknown) => e instanceof ActorRestoreError && !e.retryable,
  );
  await host.drain();
});

test.run();
