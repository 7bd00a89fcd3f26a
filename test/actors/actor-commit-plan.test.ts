import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { COMMIT_BATCH } from '../../storage/postgres/actor-store.postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { explain, planNodes } from '../support/query-plan.js';

/**
 * The commit statement's fence must stay two primary-key probes per entry however large the tables grow and whatever
 * statistics Postgres has gathered. An EXISTS probe of the journal was planned as a hashed subplan reading the whole
 * journal once the table's statistics said one key held most rows (ANALYZE, as autovacuum runs it, after one busy
 * actor), and every batch then took a second; this pins the plan.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('after ANALYZE of a journal that one actor fills, every read of the actor tables is an index probe, never a scan or a hashed subplan', async () => {
  // One busy actor with a long history and nobody else yet, as a young deployment (or a benchmark's single hot actor)
  // leaves the journal: its statistics then say one key holds every row, so a probe by key looks like reading it all.
  await sql`
    INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
    SELECT 'tally', 'hot', g, g, 1, '[[0, {"type":"tick"}]]'::json FROM generate_series(1, 200000) g`.execute(db.connection.db);
  await sql`
    INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers, next_due_at)
    SELECT 'tally', 'a' || g, 200, 1, '{}'::jsonb, '{}'::jsonb, NULL FROM generate_series(1, 2000) g`.execute(db.connection.db);
  await sql`ANALYZE actor_snapshots, actor_journal`.execute(db.connection.db);

  const batch = Array.from({ length: 100 }, (_, i) => ({
    kind: 'tally',
    key: `a${i + 1}`,
    base: 200,
    epoch: 1,
    journal: [[Date.now(), { type: 'tick' }]],
    snap: { version: 201, state: {}, timers: {}, nextDueAt: null },
  }));
  const plan = await explain(db.connection.pool, COMMIT_BATCH, [JSON.stringify(batch)]);
  const reads = [...planNodes(plan)].filter((n) => n['Relation Name'] === 'actor_journal' || n['Relation Name'] === 'actor_snapshots');
  assert.ok(reads.length >= 2, JSON.stringify(plan));
  for (const read of reads) {
    if (read['Node Type'] === 'ModifyTable') continue;
    assert.ok(/^Index( Only)? Scan$/.test(read['Node Type']), `${read['Node Type']} on ${read['Relation Name']}`);
  }
  const hashed = [...planNodes(plan)].filter((n) => n['Subplan Name']?.startsWith('hashed'));
  assert.equal(hashed.map((n) => n['Subplan Name']), []);
});

test.run();
