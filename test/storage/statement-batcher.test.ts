import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { StatementBatcher } from '../../storage/statement-batcher.js';

/**
 * The batcher's contract for a `run` that fails: every request of that batch fails with the error, and the batcher
 * goes on serving. A function typed to return a promise can still throw before it returns one (a plain function that
 * validates its inputs first); that must not leave the batch's requests unanswered or its place in flight taken.
 */

test('a run that throws before returning a promise fails its whole batch, and later batches are still served', async () => {
  let calls = 0;
  const batcher = new StatementBatcher<number, number>(
    (inputs) => {
      calls++;
      if (inputs.includes(-1)) throw new Error('refused before any promise');
      return Promise.resolve(inputs.map((n) => n * 2));
    },
    { maxInFlight: 1 },
  );
  // Settling at all is the point: the requests sharing the throwing batch were never answered.
  const outcomes = await Promise.allSettled([batcher.submit(-1), batcher.submit(1), batcher.submit(2)]);
  assert.is(outcomes[0]!.status, 'rejected');
  // Two more throwing batches: with one place in flight, a place kept by each would have stopped the batcher at the first.
  for (let i = 0; i < 2; i++) assert.is((await Promise.allSettled([batcher.submit(-1)]))[0]!.status, 'rejected');
  const served = await Promise.race([batcher.submit(21), new Promise((resolve) => setTimeout(() => resolve('no answer within 2 s'), 2_000).unref())]);
  assert.is(served, 42);
  assert.ok(calls >= 4);
});

test.run();
