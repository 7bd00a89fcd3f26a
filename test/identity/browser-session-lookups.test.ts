import { sql, type CompiledQuery } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { heldByOtherAccounts, lockLiveSessionsOfBrowser, revokeLiveEnvironmentGrantsOfBrowser, spendLiveCodesOfBrowser } from '../../identity/browser-sessions.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { planNodes, type PlanNode } from '../support/query-plan.js';

/**
 * Making a page or console session asks whether its browser holds another account's sessions, and a logout locks the
 * browser's live sessions, revokes the Environment grants it authorized and spends its codes. Read by the browser alone, both read every session the browser ever had that the sweep had
 * not removed yet (ended ones stay a day): one device signing in again and again in one browser made each next request
 * read more (ended grants stay 30 days, expired codes a day). Counted as the rows an EXPLAIN ANALYZE reads, with 5,000
 * ended sessions of one account, 10,000 ended grants and 10,000 expired codes in the browser (and 5,000 live sessions of
 * other accounts elsewhere).
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
  // The Environment grants the browser authorized: 10,000 ended (expired or revoked), three live.
  await sql`
    INSERT INTO oauth_grants (id, kind, account_id, account_epoch, browser_id, scopes, created_at, last_used_at, expires_at, revoked_at)
    SELECT 'grt_' || g, 'environment', 'acc_m', 1, 'brw_busy', '[]'::jsonb, now() - interval '2 days', now() - interval '2 days',
           CASE WHEN g <= 3 THEN now() + interval '1 hour' WHEN g % 2 = 0 THEN now() - interval '1 day' ELSE now() + interval '1 hour' END,
           CASE WHEN g > 3 AND g % 2 = 1 THEN now() - interval '1 day' END
      FROM generate_series(1, 10003) g`.execute(q);
  // The codes the browser was issued: 10,000 expired and never exchanged, two that still could be.
  await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`.execute(q);
  await sql`
    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id, auth_time, expires_at)
    SELECT 'c' || g, 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc_m', 1, 'brw_busy', now(),
           CASE WHEN g <= 2 THEN now() + interval '1 minute' ELSE now() - interval '1 hour' END
      FROM generate_series(1, 10002) g`.execute(q);
  await sql`ANALYZE oauth_codes`.execute(q);
  await sql`ANALYZE browser_sessions`.execute(q);
  await sql`ANALYZE oauth_grants`.execute(q);
});
test.after(async () => {
  await db.drop();
});

/**
 * The rows of `table` a statement reads, over all loops: index entries a bitmap scan collects, and rows any scan
 * returns or filters out beyond them. Its result, from a run of its own unless it writes; rolled back either way.
 */
async function rowsRead(compiled: CompiledQuery, table = 'browser_sessions', writes = false): Promise<{ read: number; result: unknown[] }> {
  const client = await db.connection.pool.connect();
  try {
    await client.query('BEGIN');
    const result = writes ? [] : (await client.query(compiled.sql, [...compiled.parameters])).rows;
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${compiled.sql}`, [...compiled.parameters]);
    let read = 0;
    for (const node of planNodes(rows[0]!['QUERY PLAN'][0]!.Plan)) {
      const loops = node['Actual Loops'] ?? 1;
      if (node['Node Type'] === 'Bitmap Index Scan') read += (node['Actual Rows'] ?? 0) * loops;
      else if (node['Relation Name'] !== table || node['Node Type'] === 'ModifyTable') continue;
      else if (node['Node Type'] === 'Bitmap Heap Scan') read += (node['Rows Removed by Filter'] ?? 0) * loops;
      else read += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * loops;
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

test("a logout's revocation of the browser's Environment grants reads the live ones only", async () => {
  await db.connection.db.transaction().execute(async (trx) => {
    const revoke = revokeLiveEnvironmentGrantsOfBrowser(trx, 'brw_busy', 'browser_logout', new Date()).compile();
    const { read } = await rowsRead(revoke, 'oauth_grants', true);
    assert.ok(read <= 3, `read ${read} rows`);
  });
  const live = await db.connection.db.selectFrom('oauth_grants').select('id').where('revoked_at', 'is', null).where('expires_at', '>', new Date()).execute();
  assert.is(live.length, 3, 'rolled back');
});

test("a logout's spending of the browser's codes reads those that could still be exchanged only", async () => {
  await db.connection.db.transaction().execute(async (trx) => {
    const { read } = await rowsRead(spendLiveCodesOfBrowser(trx, 'brw_busy', new Date()).compile(), 'oauth_codes', true);
    assert.ok(read <= 2, `read ${read} rows`);
  });
});

test.run();
