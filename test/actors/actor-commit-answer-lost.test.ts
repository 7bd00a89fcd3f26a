import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { systemClock } from '../../actors/clock.js';
import { ActorCommitFailedError } from '../../actors/errors.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import { hostFor, interceptCommits, withActorStore } from '../support/host.js';

/**
 * A group commit whose answer is lost after Postgres committed it (the connection broke, the client's query timeout
 * fired while the commit waited for its flush or a synchronous standby): the host must not tell senders that their
 * events were not applied (a retryable refusal, which they answer by sending the event again) when they were.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

const add = (amount: number) => ({ type: 'counter.add', amount });
type CounterContext = { total: number };
const totalOf = (snapshot: unknown): number => (snapshot as { context: CounterContext }).context.total;

/** The real store, whose next commit applies and then loses its answer, or fails before it reaches Postgres. */
function losing() {
  let next: 'applies, answer lost' | 'fails' | undefined;
  const s = interceptCommits(store, async (entries, commit) => {
    const mode = next;
    next = undefined;
    if (mode === 'fails') throw new Error('connection refused');
    const outcome = await commit(entries);
    if (mode === 'applies, answer lost') throw new Error('Connection terminated unexpectedly');
    return outcome;
  });
  return { store: s, set: (mode: typeof next) => void (next = mode) };
}

test('a commit that applied but whose answer was lost releases its replies: nobody is told to send again what is stored', async () => {
  const flaky = losing();
  const host = hostFor(flaky.store, systemClock, [counterKind], { commitLanes: 1 });
  await host.send('counter', 'lost-answer', add(1));
  await host.send('counter', 'other', add(1));
  flaky.set('applies, answer lost');
  const [mine, other] = await Promise.allSettled([host.send('counter', 'lost-answer', add(10)), host.send('counter', 'other', add(5))]);
  assert.equal(
    [mine.status === 'fulfilled' ? mine.value.version : String(mine.reason), other.status === 'fulfilled' ? other.value.version : String(other.reason)],
    [2, 2],
    'both events are stored, and their senders are told so',
  );
  const next = await host.send('counter', 'lost-answer', add(100));
  assert.is(next.version, 3);
  assert.is(totalOf(next.snapshot), 111);
  await host.drain();
});

test('a commit that did not apply still fails its replies retryably, and the actor reloads from what is stored', async () => {
  const flaky = losing();
  const host = hostFor(flaky.store, systemClock, [counterKind]);
  await host.send('counter', 'not-applied', add(1));
  flaky.set('fails');
  await rejects(() => host.send('counter', 'not-applied', add(10)), (e: unknown) => e instanceof ActorCommitFailedError && e.retryable);
  const next = await host.send('counter', 'not-applied', add(100));
  assert.is(next.version, 2);
  assert.is(totalOf(next.snapshot), 101);
  assert.is((await store.load('counter', 'not-applied'))?.version, 2);
  await host.drain();
});

test.run();
