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

test.run();
