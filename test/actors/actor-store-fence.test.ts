import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { CommitEntry } from '../../storage/actor-store.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/** ActorStore.commit: "An entry applies only if ... the journal ends exactly at `baseVersion`". */
let db: TestDatabase;
let store: PostgresActorStore;
test.before(async () => {
  db = await createTestDatabase();
  store = new PostgresActorStore(db.connection);
});
test.after(async () => {
  await db.drop();
});

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

test.run();
