import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, emit, setup } from 'xstate';
import { defineActorKind, type ActorKind } from '../../actors/actor-kind.js';
import { systemClock } from '../../actors/clock.js';
import { ActorRestoreError } from '../../actors/errors.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { hostFor, withActorStore } from '../support/host.js';

/**
 * State written by an older release and read by a newer one whose machine changed: a renamed event, a removed state, a
 * context field added. What the new build cannot read as it was written must not restore as something else (nothing a
 * client was told may be lost on a restart); it fails to restore, and the operator view says why.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

const key = { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' };
// A snapshot with every write only on an activation's first one: what follows stays in the journal, replayed on load.
const policy = { snapshotEvery: 1_000 };

type OldEvent = { type: 'add'; amount: number; at: number } | { type: 'pause'; at: number } | { type: 'ping'; at: number };
const oldMachine = setup({ types: { context: {} as { total: number }, events: {} as OldEvent } }).createMachine({
  id: 'tally',
  context: { total: 0 },
  initial: 'open',
  states: {
    open: {
      on: {
        add: { actions: assign({ total: ({ context, event }) => context.total + event.amount }) },
        pause: { target: 'paused' },
        // Changes nothing but emits: journaled by earlier builds for its action, replayed as the same action.
        ping: { actions: emit(({ context }) => ({ type: 'pong', total: context.total })) },
      },
    },
    paused: {},
  },
});
const oldKind = defineActorKind({ name: 'tally', machine: oldMachine, key, policy });

/** The next release: `add` is now `plus`, `paused` is gone, and a deadline field was added to the context. */
type NewEvent = { type: 'plus'; amount: number; at: number } | { type: 'timer.due'; name: string; dueAt: number; at: number };
const newMachine = setup({ types: { context: {} as { total: number; closesAt: number | null }, events: {} as NewEvent } }).createMachine({
  id: 'tally',
  context: { total: 0, closesAt: null },
  initial: 'open',
  states: {
    open: {
      on: {
        plus: { actions: assign({ total: ({ context, event }) => context.total + event.amount }) },
        'timer.due': { guard: ({ context, event }) => event.dueAt === context.closesAt, target: 'closed' },
      },
    },
    closed: {},
  },
});
const newKind = defineActorKind({ name: 'tally', machine: newMachine, key, policy });
const newTimedKind = defineActorKind({
  name: 'tally',
  machine: newMachine,
  key,
  policy,
  timers: (snapshot): Record<string, number> => (snapshot.context.closesAt === null ? {} : { closes: snapshot.context.closesAt }),
});

async function writtenByOldRelease(actor: string, events: readonly OldEvent['type'][], kind: ActorKind = oldKind): Promise<void> {
  const host = hostFor(store, systemClock, [kind]);
  for (const type of events) await host.send('tally', actor, type === 'add' ? { type, amount: 10 } : { type });
  await host.drain();
}

/** What a newer build makes of the actor: how a write fares, why the operator view says it does not restore. */
async function readByNewRelease(kind: ActorKind, actor: string): Promise<{ sent: string; reason: string | undefined; version: number | undefined }> {
  const host = hostFor(store, systemClock, [kind]);
  const sent = await host.send('tally', actor, { type: 'plus', amount: 1 }).then(
    () => 'restored',
    (error: unknown) => (error instanceof ActorRestoreError && !error.retryable ? 'restore failed' : String(error)),
  );
  const view = await host.inspectStored('tally', actor);
  await host.drain();
  return { sent, reason: view?.restores === false ? view.reason : undefined, version: (await store.load('tally', actor))?.version };
}

test('a journaled event the new machine no longer handles fails the restore instead of replaying as nothing', async () => {
  await writtenByOldRelease('renamed', ['add', 'add']); // the snapshot holds the first, the journal the second
  const { sent, reason, version } = await readByNewRelease(newKind, 'renamed');
  assert.is(sent, 'restore failed', 'the committed second add would otherwise be lost from the state without a trace');
  assert.match(reason ?? '', /version 2 \(add\)/);
  assert.is(version, 2, 'nothing was written over it');
});

test('an event an earlier build journaled for an emit alone still replays', async () => {
  // This build journals no answer-only event; earlier builds did, and their journals must still load.
  await writtenByOldRelease('emits', ['add']);
  const stored = (await store.load('tally', 'emits'))!;
  const at = systemClock.now();
  await store.commit([{ kind: 'tally', key: 'emits', baseVersion: 1, epoch: stored.epoch, journal: [{ version: 2, event: { type: 'ping', at }, at }] }]);
  await writtenByOldRelease('emits', ['add']);
  const host = hostFor(store, systemClock, [oldKind]);
  const reply = await host.send('tally', 'emits', { type: 'add', amount: 1 });
  assert.equal({ version: reply.version, total: (reply.snapshot.context as { total: number }).total }, { version: 4, total: 21 });
  await host.drain();
});

test('a stored snapshot in a state the new machine does not have fails the restore and says which state', async () => {
  // Snapshot with every write, so the stored snapshot itself names the removed state.
  await writtenByOldRelease('old-state', ['add', 'pause'], { ...oldKind, policy: { snapshotEvery: 1 } });
  assert.equal((await store.load('tally', 'old-state'))?.snapshot, { status: 'active', value: 'paused', context: { total: 10 }, children: {}, historyValue: {} });
  const { sent, reason } = await readByNewRelease(newKind, 'old-state');
  assert.is(sent, 'restore failed');
  assert.match(reason ?? '', /paused/);
});

test("a kind's timers reading a field an older state lacks fail the restore, not fire at once with no due time", async () => {
  await writtenByOldRelease('no-deadline', ['add']);
  const { sent, reason } = await readByNewRelease(newTimedKind, 'no-deadline');
  assert.is(sent, 'restore failed', 'closesAt is undefined there, which is not null: a timer that fired at once would close it');
  assert.match(reason ?? '', /closes/);
  const stored = await store.load('tally', 'no-deadline');
  assert.equal({ version: stored?.version, value: (stored?.snapshot as { value: string }).value }, { version: 1, value: 'open' });
});

test.run();
