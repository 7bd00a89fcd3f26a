import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import { defineActorKind } from '../../actors/actor-kind.js';
import { systemClock } from '../../actors/clock.js';
import { ActorCommitFailedError } from '../../actors/errors.js';
import type { CommitEntry } from '../../storage/actor-store.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { rejects } from '../support/assert.js';
import { hostFor, interceptCommits, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/**
 * Ephemeral events (ActorKind.ephemeral): handled in order with the others, never journaled, never stored, answered
 * without a commit of their own but never before the commits of the events ahead of them.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

type Context = { total: number; mood: string | null; deadline: number | null };
type Event =
  | { type: 'add'; amount: number; at: number }
  | { type: 'mood'; mood: string; at: number }
  | { type: 'mood.until'; mood: string; forMs: number; at: number };

const moodMachine = setup({ types: { context: {} as Context, events: {} as Event } }).createMachine({
  id: 'mood',
  context: { total: 0, mood: null, deadline: null },
  on: {
    add: { actions: assign({ total: ({ context, event }) => context.total + event.amount }) },
    mood: { actions: assign({ mood: ({ event }) => event.mood }) },
    // Declared ephemeral too, but it moves a durable deadline: the host must journal it.
    'mood.until': { actions: assign({ mood: ({ event }) => event.mood, deadline: ({ event }) => event.at + event.forMs }) },
  },
});

const moodKind = defineActorKind({
  name: 'mood',
  machine: moodMachine,
  key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
  timers: (snapshot): Record<string, number> => (snapshot.context.deadline === null ? {} : { deadline: snapshot.context.deadline }),
  ephemeral: {
    events: new Set(['mood', 'mood.until']),
    forget: (snapshot) => ({ ...snapshot, context: { ...snapshot.context, mood: null } }),
  },
});

const contextOf = (state: unknown): Context => (state as { context: Context }).context;

test('an ephemeral event changes the live state only: no version, no journal row, and neither the stored snapshot nor a reload has it', async () => {
  const host = hostFor(store, systemClock, [moodKind]);
  assert.is((await host.send('mood', 'a', { type: 'add', amount: 2 })).version, 1);
  const reply = await host.send('mood', 'a', { type: 'mood', mood: 'busy' });
  assert.is(reply.changed, true);
  assert.is(reply.version, 1, 'an ephemeral change is not a version');
  assert.is(contextOf(reply.snapshot).mood, 'busy');
  assert.is((await store.load('mood', 'a'))?.version, 1, 'nothing journaled');

  const later = await host.send('mood', 'a', { type: 'add', amount: 3 });
  assert.is(later.version, 2);
  assert.is(contextOf(later.snapshot).mood, 'busy', 'the live state keeps it across durable events');
  await host.drain();

  const reloaded = hostFor(store, systemClock, [moodKind]);
  assert.equal(contextOf((await reloaded.send('mood', 'a', { type: 'mood', mood: 'away' })).snapshot), { total: 5, mood: 'away', deadline: null });
  // An activation's first write stores a snapshot (it claims the epoch with one): taken while the mood is set.
  const after = await reloaded.send('mood', 'a', { type: 'add', amount: 1 });
  assert.equal(contextOf(after.snapshot), { total: 6, mood: 'away', deadline: null });
  await reloaded.send('mood', 'a', { type: 'mood', mood: 'busy' });
  await reloaded.send('mood', 'a', { type: 'add', amount: 1 });
  const stored = await store.load('mood', 'a');
  assert.is(stored?.snapshotVersion, 3);
  assert.equal(contextOf(stored?.snapshot), { total: 6, mood: null, deadline: null });
  assert.equal(
    stored?.tail.map((r) => (r.event as { type: string }).type),
    ['add'],
    'the journal after the stored snapshot holds the durable event only',
  );
  await reloaded.drain();
});

test('an ephemeral event waits for the commit of the durable events before it, and fails with it', async () => {
  let hold: (() => void) | undefined;
  let failNext = false;
  const held = interceptCommits(store, async (entries: readonly CommitEntry[], next) => {
    if (entries.some((e) => e.key === 'b')) {
      await new Promise<void>((resolve) => (hold = resolve));
      if (failNext) throw new Error('storage went away');
    }
    return next(entries);
  });
  const host = hostFor(held, systemClock, [moodKind]);
  const durable = host.send('mood', 'b', { type: 'add', amount: 1 });
  let answered = false;
  const ephemeral = host.send('mood', 'b', { type: 'mood', mood: 'busy' }).then((reply) => ((answered = true), reply));
  await waitFor(() => hold !== undefined, 'the first commit is held');
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.is(answered, false, 'not answered before the event ahead of it is durable');
  hold!();
  assert.is((await durable).version, 1);
  assert.is((await ephemeral).version, 1);

  hold = undefined;
  failNext = true;
  const lost = host.send('mood', 'b', { type: 'add', amount: 1 });
  const after = host.send('mood', 'b', { type: 'mood', mood: 'away' });
  await waitFor(() => hold !== undefined, 'the second commit is held');
  hold!();
  await rejects(() => lost, (e: unknown) => e instanceof ActorCommitFailedError);
  await rejects(() => after, (e: unknown) => e instanceof ActorCommitFailedError);
  await host.drain();
});

test('an event declared ephemeral that moves a durable deadline is journaled like any other', async () => {
  const host = hostFor(store, systemClock, [moodKind]);
  await host.send('mood', 'c', { type: 'add', amount: 1 });
  const reply = await host.send('mood', 'c', { type: 'mood.until', mood: 'away', forMs: 60_000 });
  assert.is(reply.version, 2);
  const stored = await store.load('mood', 'c');
  assert.is(stored?.version, 2);
  assert.ok(stored?.timers.deadline, 'the deadline is stored');
  assert.is(contextOf(stored?.snapshot).mood, null, 'the mood itself is still never stored');
  await host.drain();
});

test.run();
