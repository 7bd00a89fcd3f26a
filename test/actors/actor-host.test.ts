import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { HostObserver } from '../../actors/actor-host.js';
import { ManualClock, systemClock } from '../../actors/clock.js';
import {
  ActorCommitFailedError,
  ActorEventRejectedError,
  ActorEventUnstorableError,
  ActorFencedError,
  ActorOverloadedError,
  HostDrainingError,
  InvalidActorKeyError,
  UnknownActorKindError,
} from '../../actors/errors.js';
import type { CommitEntry } from '../../storage/actor-store.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, interceptCommits, recordingLogger, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';
import { rejects } from '../support/assert.js';

let db: TestDatabase;
let store: PostgresActorStore;

withActorStore(test, (opened) => ({ db, store } = opened));

const add = (amount: number) => ({ type: 'counter.add', amount });
type CounterContext = { total: number; deadline: number | null; expiredAt: number | null };
const contextOf = (snapshot: unknown): CounterContext => (snapshot as { context: CounterContext }).context;

function batchRecorder(): HostObserver & { batches: Array<{ actors: number; events: number }> } {
  const batches: Array<{ actors: number; events: number }> = [];
  return {
    batches,
    activated: () => {},
    deactivated: () => {},
    eventAccepted: () => {},
    batchCommitted: (actors, events) => batches.push({ actors, events }),
    batchFailed: () => {},
  };
}

test('refuses an unknown kind and a key that does not match the kind rule, before touching storage', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  await rejects(() => host.send('nope', 'a', add(1)), (e: unknown) => e instanceof UnknownActorKindError);
  await rejects(() => host.send('counter', 'Not Valid!', add(1)), (e: unknown) => e instanceof InvalidActorKeyError);
  assert.is(host.liveCount, 0);
  assert.is(await store.load('counter', 'Not Valid!'), undefined);
});

test('a reply is released only after its snapshot and journal entry are committed', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  const reply = await host.send('counter', 'durable', add(5));
  assert.is(reply.version, 1);
  assert.ok(reply.changed);
  assert.equal(reply.emitted, [{ type: 'counter.added', total: 5 }]);
  const stored = await store.load('counter', 'durable');
  assert.is(stored?.version, 1);
  assert.is(contextOf(stored?.snapshot).total, 5);
  const journal = await store.readJournal('counter', 'durable', { limit: 10 });
  assert.is(journal.length, 1);
  assert.equal((journal[0]!.event as { type: string; amount: number }).amount, 5);
  await host.drain();
});

test('events of one actor are handled one at a time in arrival order', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => host.send('counter', 'ordered', add(i + 1))));
  assert.equal(replies.map((r) => r.version), Array.from({ length: 50 }, (_, i) => i + 1));
  const journal = await store.readJournal('counter', 'ordered', { limit: 100 });
  assert.equal(
    journal.map((e) => (e.event as { amount: number }).amount).reverse(),
    Array.from({ length: 50 }, (_, i) => i + 1),
  );
  await host.drain();
});

test('group commit: concurrent events of many actors share transactions and none is lost', async () => {
  const observer = batchRecorder();
  const host = hostFor(store, systemClock, [counterKind], { observer, commitLanes: 2 });
  const actors = 200;
  const perActor = 10;
  const sends: Array<Promise<unknown>> = [];
  for (let round = 0; round < perActor; round++) {
    for (let a = 0; a < actors; a++) sends.push(host.send('counter', `group-${a}`, add(1)));
  }
  await Promise.all(sends);
  const events = observer.batches.reduce((n, b) => n + b.events, 0);
  assert.is(events, actors * perActor);
  assert.ok(observer.batches.length < events / 10, `expected grouped commits, got ${observer.batches.length} batches for ${events} events`);
  assert.ok(Math.max(...observer.batches.map((b) => b.actors)) > 1);
  const counts = await db.connection.db
    .selectFrom('actor_journal')
    .select((eb) => eb.fn.sum<string>(sql`last_version - version + 1`).as('events'))
    .where('key', 'like', 'group-%')
    .executeTakeFirstOrThrow();
  assert.is(Number(counts.events), actors * perActor);
  for (const a of [0, 57, 199]) assert.is((await store.load('counter', `group-${a}`))?.version, perActor);
  await host.drain();
});

test('an ignored event writes nothing and still answers with the durable state', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  await host.send('counter', 'ignored', add(2));
  const reply = await host.send('counter', 'ignored', { type: 'timer.due', name: 'nothing', dueAt: 0 });
  assert.is(reply.changed, false);
  assert.is(reply.version, 1);
  assert.is((await store.readJournal('counter', 'ignored', { limit: 10 })).length, 1);
  await host.drain();
});

test('a machine that throws refuses that event only: state and journal unchanged, actor still usable', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  await host.send('counter', 'poisoned', add(3));
  await rejects(() => host.send('counter', 'poisoned', { type: 'counter.poison' }), (e: unknown) => e instanceof ActorEventRejectedError && !e.retryable);
  const after = await host.send('counter', 'poisoned', add(1));
  assert.is(after.version, 2);
  assert.is(contextOf(after.snapshot).total, 4);
  await host.drain();
});

test('an event holding text Postgres cannot keep is refused alone: the other actors of its batch commit', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  const good = Array.from({ length: 20 }, (_, i) => host.send('counter', `storable-${i}`, add(1)));
  // Journalled, either would fail the statement of the whole group commit.
  const nul = host.send('counter', 'storable-0', { ...add(1), note: 'a\u0000b' });
  const surrogate = host.send('counter', 'storable-1', { ...add(1), notes: ['ok', '\ud800'] });
  await rejects(() => nul, (e: unknown) => e instanceof ActorEventUnstorableError && !e.retryable && e.pointer === '/note');
  await rejects(() => surrogate, (e: unknown) => e instanceof ActorEventUnstorableError && e.pointer === '/notes/1');
  for (const reply of await Promise.all(good)) assert.is(reply.version, 1);
  assert.is((await store.readJournal('counter', 'storable-0', { limit: 10 })).length, 1);
  await host.drain();
});

test('fencing: a write under an older epoch is refused, its replies fail retryably, and its activation stops', async () => {
  const nodeA = hostFor(store, systemClock, [counterKind]);
  const nodeB = hostFor(store, systemClock, [counterKind]);
  await nodeA.send('counter', 'fenced', add(1)); // A activates with epoch 1 and writes version 1
  await nodeB.send('counter', 'fenced', add(10)); // B loads version 1, claims epoch 2, writes version 2
  assert.is((await store.load('counter', 'fenced'))?.epoch, 2);
  // A still believes it owns the actor; its next write must lose.
  await rejects(
    () => nodeA.send('counter', 'fenced', add(100)),
    (e: unknown) => e instanceof ActorFencedError && e.retryable,
  );
  assert.is(nodeA.inspect('counter', 'fenced'), undefined, 'the fenced activation left memory');
  const stored = await store.load('counter', 'fenced');
  assert.is(stored?.version, 2);
  assert.is(contextOf(stored?.snapshot).total, 11, 'the losing write changed nothing');
  assert.is((await store.readJournal('counter', 'fenced', { limit: 10 })).length, 2, 'no journal row of the loser');
  await nodeA.drain();
  await nodeB.drain();
});

test('fencing is checked against the stored epoch even when the version would fit', async () => {
  const at = Date.now();
  const first: CommitEntry = {
    kind: 'counter',
    key: 'epoch-only',
    baseVersion: 0,
    epoch: 5,
    journal: [{ version: 1, event: { type: 'x' }, at }],
    snapshot: { version: 1, snapshot: {}, timers: {} },
  };
  assert.is((await store.commit([first])).fenced.size, 0);
  const older: CommitEntry = { kind: 'counter', key: 'epoch-only', baseVersion: 1, epoch: 4, journal: [{ version: 2, event: { type: 'y' }, at }] };
  assert.is((await store.commit([older])).fenced.size, 1);
  const behind: CommitEntry = { kind: 'counter', key: 'epoch-only', baseVersion: 0, epoch: 6, journal: [{ version: 1, event: { type: 'z' }, at }] };
  assert.is((await store.commit([behind])).fenced.size, 1, 'the journal must end at the base version');
  assert.is((await store.load('counter', 'epoch-only'))?.version, 1);
  assert.is((await store.readJournal('counter', 'epoch-only', { limit: 10 })).length, 1);
});

test('loading replays the journal after the snapshot: the state is the committed one', async () => {
  const host = hostFor(store, systemClock, [{ ...counterKind, policy: { snapshotEvery: 10 } }]);
  for (let i = 1; i <= 25; i++) await host.send('counter', 'replayed', add(i));
  await host.drain();
  const stored = await store.load('counter', 'replayed');
  assert.is(stored?.version, 25);
  assert.ok(stored!.snapshotVersion < 25 && stored!.snapshotVersion >= 15, `snapshot at ${stored?.snapshotVersion}`);
  assert.is(stored!.tail.length, 25 - stored!.snapshotVersion);
  const again = hostFor(store, systemClock, [counterKind]);
  const reply = await again.send('counter', 'replayed', add(1000));
  assert.is(reply.version, 26);
  assert.is(contextOf(reply.snapshot).total, (25 * 26) / 2 + 1000);
  await again.drain();
});

test('a failed commit fails the waiting replies and reloads the actor from its last committed snapshot', async () => {
  let failNext = false;
  const flaky = interceptCommits(store, async (entries, next) => {
    if (failNext) {
      failNext = false;
      throw new Error('connection reset by peer');
    }
    return next(entries);
  });
  const host = hostFor(flaky, systemClock, [counterKind]);
  await host.send('counter', 'flaky', add(1));
  failNext = true;
  const lost = await Promise.allSettled([host.send('counter', 'flaky', add(10)), host.send('counter', 'flaky', add(20))]);
  for (const r of lost) {
    assert.is(r.status, 'rejected');
    assert.ok(r.status === 'rejected' && r.reason instanceof ActorCommitFailedError && r.reason.retryable);
  }
  const next = await host.send('counter', 'flaky', add(100));
  assert.is(next.version, 2, 'the uncommitted versions were discarded');
  assert.is(contextOf(next.snapshot).total, 101, 'state came back from the committed snapshot');
  await host.drain();
});

test('passivation: an idle actor leaves memory and returns from its snapshot in the same state', async () => {
  const clock = new ManualClock();
  const observer = batchRecorder();
  const host = hostFor(store, clock, [counterKind], { passivateAfterMs: 60_000, observer });
  host.start();
  await host.send('counter', 'sleepy', add(7));
  await host.send('counter', 'sleepy', { type: 'counter.arm', afterMs: 3_600_000 });
  assert.ok(host.inspect('counter', 'sleepy'));
  clock.advance(30_000);
  assert.ok(host.inspect('counter', 'sleepy'), 'still live before the idle time');
  clock.advance(60_000);
  assert.is(host.inspect('counter', 'sleepy'), undefined, 'passivated after the idle time');
  const reply = await host.send('counter', 'sleepy', add(1));
  assert.is(reply.version, 3);
  assert.equal(reply.snapshot.value, 'armed');
  assert.is(contextOf(reply.snapshot).total, 8);
  await host.drain();
});

test('durable timer: a deadline armed before a restart fires after it, with an injected clock', async () => {
  const clock = new ManualClock();
  const first = hostFor(store, clock, [counterKind], { timerPollMs: 1_000 });
  first.start();
  const armed = await first.send('counter', 'timer-restart', { type: 'counter.arm', afterMs: 5 * 60_000 });
  const deadline = contextOf(armed.snapshot).deadline!;
  assert.is(deadline, clock.now() + 5 * 60_000);
  assert.is((await store.load('counter', 'timer-restart'))?.timers.deadline, deadline);
  await first.drain(); // the process goes away with the deadline pending

  const later = new ManualClock(clock.now() + 6 * 60_000);
  const second = hostFor(store, later, [counterKind], { timerPollMs: 1_000 });
  second.start();
  later.advance(0); // the poller's first run
  const expired = await waitFor(async () => {
    const stored = await store.load('counter', 'timer-restart');
    return (stored?.snapshot as { value: string } | undefined)?.value === 'expired' ? stored : undefined;
  }, 'the timer to fire after restart');
  assert.is(contextOf(expired.snapshot).deadline, null);
  assert.equal(expired.timers, {}, 'the fired deadline is no longer persisted');
  const journal = await store.readJournal('counter', 'timer-restart', { limit: 1 });
  assert.equal((journal[0]!.event as { type: string; name: string }).type, 'timer.due');
  await second.drain();
});

test('durable timer: fires in a live actor when the clock reaches it, and survives passivation', async () => {
  const clock = new ManualClock();
  const host = hostFor(store, clock, [counterKind], { timerPollMs: 1_000, passivateAfterMs: 10_000 });
  host.start();
  await host.send('counter', 'timer-live', { type: 'counter.arm', afterMs: 60_000 });
  clock.advance(20_000);
  assert.is(host.inspect('counter', 'timer-live'), undefined, 'passivated with a timer pending');
  clock.advance(30_000);
  assert.is(((await store.load('counter', 'timer-live'))?.snapshot as { value: string }).value, 'armed', 'not before its time');
  // The poller queries storage asynchronously, so time keeps moving while we wait, as it would for real.
  await waitFor(async () => {
    clock.advance(1_000);
    return ((await store.load('counter', 'timer-live'))?.snapshot as { value: string }).value === 'expired';
  }, 'the deadline to fire');
  assert.ok(clock.now() >= Date.parse('2026-01-01T00:01:00Z'), 'fired at or after its due time');
  await host.drain();
});

test('back-pressure: an actor with too many uncommitted events tells senders to back off', async () => {
  const host = hostFor(store, systemClock, [{ ...counterKind, policy: { maxPendingEvents: 5 } }]);
  const results = await Promise.allSettled(Array.from({ length: 20 }, () => host.send('counter', 'crowded', add(1))));
  const refused = results.filter((r) => r.status === 'rejected');
  assert.ok(refused.length > 0);
  assert.ok(refused.every((r) => r.status === 'rejected' && r.reason instanceof ActorOverloadedError));
  const accepted = results.length - refused.length;
  assert.is((await store.load('counter', 'crowded'))?.version, accepted);
  await host.drain();
});

test('drain: accepted events finish, new ones are refused, nothing stays queued', async () => {
  const host = hostFor(store, systemClock, [counterKind]);
  const inFlight = Array.from({ length: 100 }, (_, i) => host.send('counter', `drain-${i % 10}`, add(1)));
  const draining = host.drain();
  await rejects(() => host.send('counter', 'drain-0', add(1)), (e: unknown) => e instanceof HostDrainingError);
  await draining;
  const settled = await Promise.allSettled(inFlight);
  assert.ok(settled.every((s) => s.status === 'fulfilled'));
  assert.is(host.liveCount, 0);
  const versions = await Promise.all(Array.from({ length: 10 }, (_, i) => store.load('counter', `drain-${i}`)));
  assert.is(versions.reduce((n, s) => n + (s?.version ?? 0), 0), 100);
});

test('delayed XState events are refused as a design error, loudly', async () => {
  const { setup } = await import('xstate');
  const machine = setup({}).createMachine({ initial: 'a', states: { a: { on: { go: 'b' } }, b: { after: { 1000: 'a' } } } });
  const logger = recordingLogger();
  const host = hostFor(store, systemClock, [{ name: 'delayed', machine, key: { pattern: /^.+$/, describe: 'any' } }], { logger });
  await host.send('delayed', 'd', { type: 'go' });
  assert.ok(logger.entries.some((e) => e.level === 'warn' && /delayed event/.test(e.message)));
  await host.drain();
});

test.run();
