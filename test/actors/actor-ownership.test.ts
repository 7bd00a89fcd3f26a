import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { defineActorKind } from '../../actors/actor-kind.js';
import { ManualClock, systemClock } from '../../actors/clock.js';
import { ActorRestoreError } from '../../actors/errors.js';
import { InProcessOwnership } from '../../actors/ownership.js';
import type { StoredActor } from '../../storage/actor-store.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import { hostFor, interceptCommits, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/**
 * Ownership epochs of activations that never came to life: an activation that claimed an epoch and then failed to
 * restore, or was stopped by drain while it loaded, sent nothing under it, so nothing of it need be remembered; and
 * forgetting it must never lower the floor a later activation's epoch has to clear.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

/** A later build of the counter whose timers() cannot read a stored state (the armed one). */
const brokenCounter = defineActorKind({
  ...counterKind,
  timers: (snapshot): Record<string, number> => {
    if (snapshot.context.deadline !== null) throw new Error('timers cannot read this state');
    return {};
  },
});

test('an activation that claimed an epoch and then failed to restore leaves no epoch behind', async () => {
  const writer = hostFor(store, systemClock, [counterKind]);
  const keys = ['broken-0', 'broken-1', 'broken-2'];
  for (const key of keys) await writer.send('counter', key, { type: 'counter.arm', afterMs: 3_600_000 });
  await writer.drain();
  const ownership = new InProcessOwnership();
  const host = hostFor(store, systemClock, [brokenCounter], { ownership });
  for (const key of keys) {
    await rejects(() => host.send('counter', key, { type: 'counter.add', amount: 1 }), (e) => e instanceof ActorRestoreError);
  }
  await host.drain();
  const stored = (await store.load('counter', 'broken-0'))!.epoch;
  const next = await Promise.all(keys.map((key) => ownership.claim('counter', key, stored)));
  assert.equal(next, keys.map(() => stored + 1), `epochs of the failed activations are still remembered: next epochs ${next}`);
});

test('an activation stopped by drain while it loaded leaves no epoch behind', async () => {
  const clock = new ManualClock(Date.parse('2026-03-01T00:00:00Z'));
  const writer = hostFor(store, clock, [counterKind]);
  await writer.send('counter', 'due-at-drain', { type: 'counter.arm', afterMs: 1_000 });
  await writer.drain();
  clock.advance(5_000); // the deadline has passed: the poller activates the actor

  let held: ((value: StoredActor | undefined) => void) | undefined;
  const gated = interceptCommits(store, (entries, next) => next(entries));
  gated.load = (kind, key) =>
    store.load(kind, key).then((stored) => new Promise<StoredActor | undefined>((resolve) => (held = () => resolve(stored))));
  const ownership = new InProcessOwnership();
  const host = hostFor(gated, clock, [counterKind], { ownership });
  host.start();
  clock.advance(0);
  await waitFor(() => held !== undefined, 'the poller to start loading the actor');
  assert.is(host.inspect('counter', 'due-at-drain')?.status, 'loading');
  await host.drain(); // nothing is pending, so drain stops the activation while it loads
  held!(undefined);
  await new Promise((r) => setTimeout(r, 50)); // the load completes: it claims an epoch, which the stopped activation never takes
  const stored = (await store.load('counter', 'due-at-drain'))!.epoch;
  assert.is(await ownership.claim('counter', 'due-at-drain', stored), stored + 1, 'the stopped activation\'s epoch is still remembered');
});

test('forgetting an epoch nothing was sent under never lowers the floor set by one that may still reach the store', () => {
  const run = async () => {
    const ownership = new InProcessOwnership();
    const unsettled = await ownership.claim('counter', 'k', 0); // its write's answer was lost: it may yet land
    ownership.release('counter', 'k', unsettled, 'unsettled');
    const reader = await ownership.claim('counter', 'k', 0); // loaded before that write landed, wrote nothing
    ownership.release('counter', 'k', reader, 'unused');
    const next = await ownership.claim('counter', 'k', 0);
    assert.ok(next > unsettled, `epoch ${next} granted again while epoch ${unsettled} may still reach the store`);
    ownership.release('counter', 'k', next, 'stored'); // the store now holds `next`, which fences every older epoch
    assert.is(await ownership.claim('counter', 'k', next), next + 1);
  };
  return run();
});

test.run();
