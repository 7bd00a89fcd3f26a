import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import { defineActorKind } from '../../actors/actor-kind.js';
import { systemClock } from '../../actors/clock.js';
import { ActorCommitFailedError } from '../../actors/errors.js';
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

test.run();
