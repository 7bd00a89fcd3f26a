import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { defineActorKind } from '../../actors/actor-kind.js';
import type { HostObserver } from '../../actors/actor-host.js';
import { ManualClock } from '../../actors/clock.js';
import { RestoreBackoff } from '../../actors/restore-backoff.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { hostFor, interceptCommits, recordingLogger, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/**
 * An actor whose stored state no longer restores but holds a due timer: the poller finds it on every poll. It is tried
 * again after a doubling wait (not every ACTOR_TIMER_POLL_MS), its failure is logged once and then now and then with a
 * count, and all of that is forgotten once it restores.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

/** A later build of the counter whose timers() cannot read the armed state, until `broken` is cleared (a fix). */
let broken = true;
const brokenCounter = defineActorKind({
  ...counterKind,
  timers: (snapshot): Record<string, number> => {
    if (broken && snapshot.context.deadline !== null) throw new Error('timers cannot read this state');
    return snapshot.context.deadline === null ? {} : { deadline: snapshot.context.deadline };
  },
});

function activations(): HostObserver & { count: number } {
  const o = { count: 0, activated: () => void o.count++, deactivated: () => {}, eventAccepted: () => {}, batchCommitted: () => {}, batchFailed: () => {} };
  return o;
}

test('an actor that does not restore but has a due timer is retried with a growing wait and logged now and then, not every poll', async () => {
  const clock = new ManualClock(Date.parse('2026-04-01T00:00:00Z'));
  const writer = hostFor(store, clock, [counterKind]);
  await writer.send('counter', 'unrestorable', { type: 'counter.arm', afterMs: 1_000 });
  await writer.drain();
  clock.advance(2_000);

  let polls = 0;
  const counted = interceptCommits(store, (entries, next) => next(entries));
  counted.dueActors = (before, limit, after) => store.dueActors(before, limit, after).finally(() => void polls++);
  const logger = recordingLogger();
  const observer = activations();
  const host = hostFor(counted, clock, [brokenCounter], { timerPollMs: 1_000, logger, observer });
  const settled = () => waitFor(() => host.inspect('counter', 'unrestorable')?.status !== 'loading', 'the load to settle');
  /** One poll interval: the poll runs, and whatever it activated has loaded (and failed) before time moves on. */
  const tick = async () => {
    const before = polls;
    clock.advance(1_000);
    await waitFor(() => polls > before, 'a poll');
    await new Promise((r) => setImmediate(r));
    await settled();
  };
  host.start();
  clock.advance(0);
  await waitFor(() => polls > 0, 'the first poll');
  await settled();
  for (let s = 0; s < 600; s++) await tick(); // ten minutes
  const about = logger.entries.filter((e) => e.details.actor === 'counter/unrestorable');
  assert.ok(observer.count <= 10, `loaded ${observer.count} times in ten minutes (a poll every second)`);
  assert.ok(observer.count >= 5, `loaded ${observer.count} times in ten minutes: it must still be tried now and then`);
  assert.is(about.length, 1, `logged ${about.length} times: ${about.map((e) => e.message).join('; ')}`);
  assert.is(about[0]!.level, 'error');

  broken = false; // a fixed build: the next try restores it and the timer is delivered
  for (let s = 0; s < 600 && host.inspect('counter', 'unrestorable')?.status !== 'live'; s++) await tick();
  await waitFor(async () => (await store.load('counter', 'unrestorable'))?.version === 2, 'the overdue timer to be delivered');
  assert.is(host.unrestorableCount, 0, 'the restored actor is forgotten');
  await host.drain();
});

test('the backoff doubles to its ceiling, logs the first failure then one per interval with the count, forgets on restore, and stays bounded', () => {
  const backoff = new RestoreBackoff({ firstMs: 1_000, maxMs: 8_000, limit: 3, logEveryMs: 20_000 });
  let now = 0;
  const seen: Array<[number, number, boolean]> = [];
  for (let i = 0; i < 7; i++) {
    const { failures, retryAt, log } = backoff.failed('a', now);
    seen.push([failures, retryAt - now, log]);
    assert.ok(backoff.waiting('a', retryAt - 1) && !backoff.waiting('a', retryAt));
    now = retryAt;
  }
  assert.equal(seen, [
    [1, 1_000, true], [2, 2_000, false], [3, 4_000, false], [4, 8_000, false], [5, 8_000, false], [6, 8_000, true], [7, 8_000, false],
  ]);
  backoff.restored('a');
  assert.is(backoff.waiting('a', now), false);
  assert.equal(backoff.failed('a', now), { failures: 1, retryAt: now + 1_000, log: true }, 'after restoring, a failure is a first one again');
  for (const id of ['b', 'c', 'd', 'e']) backoff.failed(id, now);
  assert.is(backoff.size, 3, 'a flood of broken actors is held to the limit');
  assert.equal(['a', 'b', 'c', 'd', 'e'].map((id) => backoff.waiting(id, now)), [false, false, true, true, true], 'the oldest failures go first');
});

test.run();
