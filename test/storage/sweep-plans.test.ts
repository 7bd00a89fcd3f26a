import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { accessSweepStatements } from '../../identity/access-sweep.js';
import { runtimeGrantSweepStatements } from '../../runtime/grant-sweep.js';
import { SWEEP_BATCH } from '../../storage/sweep.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { explain, planNodes } from '../support/query-plan.js';

/**
 * Each sweep statement finds its due rows through an index (migration 0018), on tables large enough that reading them
 * whole would be the planner's cheaper choice otherwise: a sweep drains a backlog one batch after another, and a scan
 * per batch would make draining cost the backlog's square. Review Host capabilities, one or two per reviewer, are the
 * exception, by design.
 */
let db: TestDatabase;
const ROWS = 30_000;

test.before(async () => {
  db = await createTestDatabase();
  const q = db.connection.db;
  await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`.execute(q);
  // Live rows, none due: what a healthy database holds between sweeps.
  await sql`
    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id, auth_time, expires_at)
    SELECT 'c' || g, 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc', 1, 'brw' || g, now(), now() + interval '1 minute'
      FROM generate_series(1, ${ROWS}::int) g`.execute(q);
  await sql`
    INSERT INTO browser_sessions (id, kind, secret_hash, browser_id, account_id, account_epoch, created_at, expires_at)
    SELECT 'bs' || g, 'page', 'h' || g, 'brw' || g, 'acc', 1, now(), now() + interval '1 day' FROM generate_series(1, ${ROWS}::int) g`.execute(q);
  await sql`
    INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, scopes, created_at, last_used_at, expires_at)
    SELECT 'grt' || g, 'cli', 'cli', 'acc', 1, '[]'::jsonb, now(), now(), now() + interval '30 days' FROM generate_series(1, ${ROWS}::int) g`.execute(q);
  await sql`
    INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
    SELECT 'rt' || g, 'grt' || g, 1, now() FROM generate_series(1, ${ROWS}::int) g`.execute(q);
  for (const table of ['environment_backend_grants', 'plugin_grants']) {
    const extra = table === 'plugin_grants' ? sql`'plg_media', 'control',` : sql``;
    const extraColumns = table === 'plugin_grants' ? sql`plugin_id, component,` : sql``;
    const endpoint = table === 'environment_backend_grants' ? sql`, endpoint` : sql``;
    const endpointValue = table === 'environment_backend_grants' ? sql`, 'https://api.example'` : sql``;
    await sql`
      INSERT INTO ${sql.table(table)} (id, token_hash, ${extraColumns} account_id, actor_id, environment_id, origin, oauth_grant_id, session_id,
                                       lease_id, lease_version, scopes, roles, context, created_at, expires_at ${endpoint})
      SELECT 'g' || g, 't' || g, ${extra} 'acc', 'act', 'env', 'https://e.example', 'grt', 'rts' || g, 'lease', 1,
             '[]'::jsonb, '[]'::jsonb, '{}'::jsonb, now(), now() + interval '5 minutes' ${endpointValue}
        FROM generate_series(1, ${ROWS}::int) g`.execute(q);
  }
  await sql`ANALYZE`.execute(q);
});
test.after(async () => {
  await db.drop();
});

test("every sweep statement but the Review Host capabilities' reads its table through an index, not whole", async () => {
  const statements = [...accessSweepStatements(Date.now()), ...accessSweepStatements(Date.now(), Date.now() - 2 * 24 * 3600_000), ...runtimeGrantSweepStatements(Date.now())];
  for (const [table, statement] of statements) {
    if (table === 'review_host_capabilities') continue;
    const compiled = statement(SWEEP_BATCH).compile(db.connection.db);
    const plan = await explain(db.connection.pool, compiled.sql, compiled.parameters);
    const scans = [...planNodes(plan)].filter((n) => n['Node Type'] === 'Seq Scan');
    assert.equal(scans.map((n) => n['Relation Name']), [], `${table}: ${JSON.stringify(plan)}`);
  }
});

test.run();
