import { sql, type CompiledQuery } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { heldByOtherAccounts, lockLiveSessionsOfBrowser } from '../../identity/browser-sessions.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { planNodes, type PlanNode } from '../support/query-plan.js';

/**
 * Making a page or console session asks whether its browser holds another account's sessions, and a logout locks the
 * browser's live sessions. Read by the browser alone, both read every session the browser ever had that the sweep had
 * not removed yet (ended ones stay a day): one device signing in again and again in one browser made each next request
 * read more. Counted as the rows an EXPLAIN ANALYZE reads, with 5,000 ended sessions of one account in the browser
 * (and 5,000 live ones of other accounts elsewhere).
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
  const q = db.connection.db;
  await sql`
    INSERT INTO browser_sessions (id, kind, secret_hash, browser_id, account_id, account_epoch, created_at, expires_at, revoked_at, revoked_reason)
    SELECT 'pgs_' || g, 'page', 'h' || g, 'brw_busy', 'acc_m', 1, now() - interval '1 hour', now() + interval '11 hours',
           CASE WHEN g > 3 THEN now() END, CASE WHEN g > 3 THEN 'session_cap' END
      FROM generate_series(1, 5000) g`.execute(q);
  // Everyone else's live sessions, each in a browser of its own.
  await sql`
    INSERT INTO browser_sessions (id, kind, secret_hash, browser_id, account_id, account_epoch, created_at, expires_at)
    SELECT 'pgs_live_' || g, 'page', 'hl' || g, 'brw_' || g, 'acc_' || g, 1, now(), now() + interval '12 hours'
      FROM generate_series(1, 5000) g`.execute(q);
  await sql`
    INSERT INTO browser_sessions (id, kind, secret_hash, browser_id, account_id, account_epoch, created_at, expires_at)
    VALUES ('pgs_other', 'page', 'h-other', 'brw_shared', 'acc_z', 1, now(), now() + interval '12 hours'),
           ('pgs_mine', 'page', 'h-mine', 'brw_shared', 'acc_m', 1, now(), now() + interval '12 hours')`.execute(q);
  await sql`ANALYZE browser_sessions`.execute(q);
});
test.after(async () => {
  await db.drop();
});

/** The rows of browser_sessions a statement reads (returned or filtered out, over all loops), and its result. */
async function rowsRead(compiled: CompiledQuery): Promise<{ read: number; result: unknown[] }> {
  const client = await db.connection.pool.connect();
  try {
    await client.query('BEGIN');
    const result = (await client.query(compiled.sql, [...compiled.parameters])).rows;
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${compiled.sql}`, [...compiled.parameters]);
    let read = 0;
    for (const node of planNodes(rows[0]!['QUERY PLAN'][0]!.Plan)) {
      if (node['Relation Name'] !== 'browser_sessions') continue;
      read += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1);
    }
    return { read, result };
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

test("whether a browser holds another account's sessions reads a row or two, however many the account has there", async () => {
  const own = await rowsRead(heldByOtherAccounts('brw_busy', 'acc_m').compile(db.connection.db));
  assert.equal(own.result, [{ held: false }]);
  assert.ok(own.read <= 2, `read ${own.read} rows`);
  const shared = await rowsRead(heldByOtherAccounts('brw_shared', 'acc_m').compile(db.connection.db));
  assert.equal(shared.result, [{ held: true }]);
  const stranger = await rowsRead(heldByOtherAccounts('brw_busy', 'acc_a').compile(db.connection.db));
  assert.equal(stranger.result, [{ held: true }]);
  assert.ok(stranger.read <= 2, `read ${stranger.read} rows`);
});

test("a logout's lock of the browser's live sessions reads the live ones only", async () => {
  await db.connection.db.transaction().execute(async (trx) => {
    const { read, result } = await rowsRead(lockLiveSessionsOfBrowser(trx, 'brw_busy').compile());
    assert.is(result.length, 3);
    assert.ok(read <= 3, `read ${read} rows`);
  });
});

test.run();
