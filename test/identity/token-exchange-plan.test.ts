import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EXCHANGE_CODES } from '../../identity/oauth-grants.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { explain, planNodes } from '../support/query-plan.js';

/**
 * The token exchange must find each presented code by its key, whatever the statistics say: a plan that reads the
 * unused codes and hashes them against the batch costs what the backlog of unused codes costs, which grows with the
 * load. Migration 0009's partial index (`WHERE used_at IS NULL`) offered Postgres exactly that plan, and it took it
 * whenever ANALYZE had last seen few unused codes; this pins the plan after such a burst.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('after a burst of authorizations that ANALYZE has not seen, a batch of exchanges probes each code by its key', async () => {
  const q = db.connection.db;
  await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`.execute(q);
  const codes = (from: number, count: number, used: boolean) => sql`
    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id,
                             auth_time, expires_at, used_at)
    SELECT 'c' || g, 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc', 1, 'brw' || (g % 500), now(), now() + interval '1 minute',
           ${used ? sql`now()` : sql`NULL`}
      FROM generate_series(${from}::int, ${from + count - 1}::int) g`;
  // Statistics taken while nearly every code was spent, as between bursts; then a burst nobody has analysed yet.
  await codes(1, 5_000, true).execute(q);
  await codes(5_001, 10, false).execute(q);
  await sql`ANALYZE oauth_codes`.execute(q);
  await codes(10_001, 20_000, false).execute(q);

  const batch = Array.from({ length: 64 }, (_, i) => `c${10_001 + i * 7}`);
  const at = new Date().toISOString();
  const column = <T>(value: T): T[] => batch.map(() => value);
  const params = [batch, batch.map((_, i) => `grt_${i}`), column('cli'), column('cli'), column(null), column('http://127.0.0.1/cb'), column('x'), column(null), column(at), column(at)];
  const plan = await explain(db.connection.pool, EXCHANGE_CODES, params);
  const reads = [...planNodes(plan)].filter((n) => n['Relation Name'] === 'oauth_codes' && n['Node Type'] !== 'ModifyTable');
  assert.ok(reads.length >= 1, JSON.stringify(plan));
  for (const read of reads) assert.equal(`${read['Node Type']} ${read['Index Name'] ?? ''}`, 'Index Scan oauth_codes_pkey');
});

test("the count of an account's live CLI sign-ins reads the partial index of live grants, never the ended ones", async () => {
  const q = db.connection.db;
  // Ended sign-ins kept for their retention far outnumber the live ones.
  await sql`
    INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, scopes, created_at, last_used_at, expires_at, revoked_at)
    SELECT 'g' || g, 'cli', 'cli', 'acc' || (g % 200), 1, '[]'::jsonb, now(), now(), now() + interval '30 days',
           CASE WHEN g % 20 = 0 THEN NULL ELSE now() END
      FROM generate_series(1, 20000) g`.execute(q);
  await sql`ANALYZE oauth_grants`.execute(q);
  const batch = ['c10001', 'c10008'];
  const at = new Date().toISOString();
  const column = <T>(value: T): T[] => batch.map(() => value);
  const params = [batch, ['grt_a', 'grt_b'], column('cli'), column('cli'), column(null), column('http://127.0.0.1/cb'), column('x'), column(null), column(at), column(at)];
  const plan = await explain(db.connection.pool, EXCHANGE_CODES, params);
  const nodes = [...planNodes(plan)];
  const scans = nodes.filter((n) => n['Relation Name'] === 'oauth_grants' && n['Node Type'] !== 'ModifyTable');
  assert.ok(scans.length >= 1, JSON.stringify(plan));
  assert.not.ok(scans.some((n) => n['Node Type'] === 'Seq Scan'), JSON.stringify(plan));
  const indexes = nodes.map((n) => n['Index Name']).filter((name) => typeof name === 'string' && name.startsWith('oauth_grants'));
  assert.equal([...new Set(indexes)], ['oauth_grants_live_by_account'], JSON.stringify(plan));
});

test('after statistics that saw every page session ended, a batch of exchanges probes each authorizing session by its key', async () => {
  const q = db.connection.db;
  const sessions = (from: number, count: number, revoked: boolean) => sql`
    INSERT INTO browser_sessions (id, kind, secret_hash, browser_id, account_id, account_epoch, created_at, expires_at, revoked_at)
    SELECT 'ses' || g, 'page', 'h' || g, 'brw' || g, 'acc' || (g % 1000), 1, now(), now() + interval '12 hours',
           ${revoked ? sql`now()` : sql`NULL`}
      FROM generate_series(${from}::int, ${from + count - 1}::int) g`;
  // Every page session ended when ANALYZE looked (a wave of logouts); then new ones nobody has analysed yet.
  await sessions(1, 20_000, true).execute(q);
  await sql`ANALYZE browser_sessions`.execute(q);
  await sessions(20_001, 6_000, false).execute(q);
  await sql`
    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id,
                             session_id, auth_time, expires_at)
    SELECT 's' || g, 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc', 1, 'brw' || g, 'ses' || g, now(), now() + interval '1 minute'
      FROM generate_series(20001, 26000) g`.execute(q);
  const batch = Array.from({ length: 64 }, (_, i) => `s${20_001 + i * 7}`);
  const at = new Date().toISOString();
  const column = <T>(value: T): T[] => batch.map(() => value);
  const params = [batch, batch.map((_, i) => `grt_s${i}`), column('cli'), column('cli'), column(null), column('http://127.0.0.1/cb'), column('x'), column(null), column(at), column(at)];
  const nodes = [...planNodes(await explain(db.connection.pool, EXCHANGE_CODES, params))];
  const indexes = nodes.map((n) => n['Index Name']).filter((name): name is string => typeof name === 'string' && name.startsWith('browser_sessions'));
  assert.ok(indexes.length >= 1, JSON.stringify(nodes[0]));
  assert.equal([...new Set(indexes)], ['browser_sessions_pkey'], JSON.stringify(nodes[0]));
});

test.run();
