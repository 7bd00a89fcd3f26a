import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { systemClock } from '../../actors/clock.js';
import type { CommitEntry } from '../../storage/actor-store.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { hostFor, interceptCommits, withActorStore } from '../support/host.js';

/**
 * An event the machine only answers (its refusals and reads emit an event and change nothing) was journaled like an
 * accepted one: every refused request cost the store a write, and whoever could send refused requests (an enrolling
 * device polling its completion) wrote the account's journal at their request rate. It is now handled like an ignored
 * event: no journal entry, the reply carrying what was emitted once the state it reports is durable.
 */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

const add = (amount: number) => ({ type: 'counter.add', amount });
const peek = { type: 'counter.peek' };

test('an answer-only event writes nothing and answers with what it emitted', async () => {
  const committed: Array<readonly CommitEntry[]> = [];
  const host = hostFor(interceptCommits(store, (entries, next) => (committed.push(entries), next(entries))), systemClock, [counterKind]);
  await host.send('counter', 'peeked', add(3));
  const before = committed.length;
  for (let i = 0; i < 20; i++) {
    const reply = await host.send('counter', 'peeked', peek);
    assert.equal(reply.emitted, [{ type: 'counter.peeked', total: 3 }]);
    assert.is(reply.changed, false);
    assert.is(reply.version, 1);
  }
  assert.is(committed.length, before, 'no commit for the answers');
  assert.is((await store.readJournal('counter', 'peeked', { limit: 50 })).length, 1);
  assert.is((await store.load('counter', 'peeked'))?.version, 1);
  await host.drain();
});

test('an answer-only event behind an uncommitted one is answered only once that one is durable', async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const host = hostFor(interceptCommits(store, async (entries, next) => (await held, next(entries))), systemClock, [counterKind]);
  const added = host.send('counter', 'behind', add(5));
  let answered = false;
  const peeked = host.send('counter', 'behind', peek).then((reply) => ((answered = true), reply));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.is(answered, false, 'not before the add it reports is committed');
  release();
  assert.is((await added).version, 1);
  assert.equal((await peeked).emitted, [{ type: 'counter.peeked', total: 5 }]);
  assert.is((await store.readJournal('counter', 'behind', { limit: 50 })).length, 1);
  await host.drain();
});

test.run();
