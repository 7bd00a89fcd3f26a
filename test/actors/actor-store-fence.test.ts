import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { CommitEntry } from '../../storage/actor-store.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { withActorStore } from '../support/host.js';

/** The store's fences: commit ("the journal ends exactly at `baseVersion`") and replaceTimers (snapshot version, epoch). */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

test('an entry whose base version is ahead of the stored journal is refused, not stored with a gap', async () => {
  const at = Date.now();
  const first: CommitEntry = {
    kind: 'counter', key: 'gap', baseVersion: 0, epoch: 1,
    journal: [{ version: 1, event: { type: 'a' }, at }],
    snapshot: { version: 1, snapshot: {}, timers: {} },
  };
  assert.is((await store.commit([first])).fenced.size, 0);
  const ahead: CommitEntry = { kind: 'counter', key: 'gap', baseVersion: 5, epoch: 1, journal: [{ version: 6, event: { type: 'b' }, at }] };
  const outcome = await store.commit([ahead]);
  const stored = await store.load('counter', 'gap');
  assert.is(outcome.fenced.size, 1, `accepted: stored version ${stored?.version}, tail versions ${stored?.tail.map((r) => r.version)} (2..5 missing)`);
});

test('replaceTimers applies only to the snapshot version it names and never under a newer epoch', async () => {
  const at = Date.now();
  const due = at + 60_000;
  await store.commit([{
    kind: 'counter', key: 'timers', baseVersion: 0, epoch: 2,
    journal: [{ version: 1, event: { type: 'a' }, at }],
    snapshot: { version: 1, snapshot: {}, timers: { deadline: due } },
  }]);
  assert.is(await store.replaceTimers('counter', 'timers', 1, 1, {}, null), false, 'an older epoch');
  assert.is(await store.replaceTimers('counter', 'timers', 2, 0, {}, null), false, 'another snapshot version');
  assert.equal((await store.load('counter', 'timers'))?.timers, { deadline: due }, 'refusals leave the row alone');
  assert.equal((await store.dueActors(due, 10)).map((d) => d.key), ['timers']);

  assert.is(await store.replaceTimers('counter', 'timers', 2, 1, {}, null), true);
  assert.equal((await store.load('counter', 'timers'))?.timers, {});
  assert.equal(await store.dueActors(due + 3_600_000, 10), [], 'no longer found by the poller');
});

test.run();
