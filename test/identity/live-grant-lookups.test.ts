import { sql, type CompiledQuery } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { liveGrantsOf } from '../../identity/oauth-grants.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { planNodes, type PlanNode } from '../support/query-plan.js';

/**
 * The count a new desktop management session is refused by, and the list of an account's CLI sign-ins, read the
 * account's grants of that kind; revoked and expired grants stay 30 days, and read by (account, kind) alone they were
 * read too: a Shell creating and revoking sessions made each next creation dearer. Counted as the rows an EXPLAIN
 * ANALYZE reads, with 5,000 ended grants of each kind beside three live ones.
 */
let db: TestDatabase;
const NOW = Date.now();

test.before(async () => {
  db = await createTestDatabase();
  const q = db.connection.db;
  for (const kind of ['desktop', 'cli']) {
    await sql`
      INSERT INTO oauth_grants (id, kind, account_id, account_epoch, scopes, created_at, last_used_at, expires_at, revoked_at, revoked_reason)
      SELECT ${kind} || '_ended_' || g, ${kind}, 'acc_d', 1, '[]'::jsonb, now() - interval '2 days', now() - interval '2 days',
             CASE WHEN g % 2 = 0 THEN now() - interval '1 day' ELSE now() + interval '1 hour' END,
             CASE WHEN g % 2 = 0 THEN NULL ELSE now() - interval '1 day' END,
             CASE WHEN g % 2 = 0 THEN NULL ELSE 'revoked_by_owner' END
        FROM generate_series(1, 5000) g`.execute(q);
    await sql`
      INSERT INTO oauth_grants (id, kind, account_id, account_epoch, scopes, created_at, last_used_at, expires_at)
      SELECT ${kind} || '_live_' || g, ${kind}, 'acc_d', 1, '[]'::jsonb, now(), now(), now() + interval '1 hour'
        FROM generate_series(1, 3) g`.execute(q);
  }
  await sql`ANALYZE oauth_grants`.execute(q);
});
test.after(async () => {
  await db.drop();
});

/** The rows of oauth_grants a statement reads (returned or filtered out, over all loops), and its result. */
async function rowsRead(compiled: CompiledQuery): Promise<{ read: number; result: unknown[] }> {
  const result = (await db.connection.pool.query(compiled.sql, [...compiled.parameters])).rows;
  const { rows } = await db.connection.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${compiled.sql}`, [...compiled.parameters]);
  let read = 0;
  for (const node of planNodes(rows[0]!['QUERY PLAN'][0]!.Plan)) {
    if (node['Relation Name'] !== 'oauth_grants' || node['Node Type'] === 'Bitmap Index Scan') continue;
    read += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1);
  }
  return { read, result };
}

test("a new desktop session's count of the live ones reads the live ones only", async () => {
  const counted = liveGrantsOf(db.connection.db, 'acc_d', 'desktop', 1, NOW)
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .compile();
  const { read, result } = await rowsRead(counted);
  assert.is(Number((result[0] as { count: unknown }).count), 3);
  assert.ok(read <= 3, `read ${read} rows`);
});

test("the list of an account's CLI sign-ins reads the live ones only", async () => {
  const { read, result } = await rowsRead(liveGrantsOf(db.connection.db, 'acc_d', 'cli', 1, NOW).select('id').compile());
  assert.is(result.length, 3);
  assert.ok(read <= 3, `read ${read} rows`);
});

test.run();
