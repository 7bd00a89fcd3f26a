import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ROTATE_REFRESH_TOKENS } from '../../identity/oauth-grants.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { explain, planNodes } from '../support/query-plan.js';

/**
 * A batch of refresh rotations must find each token's grant by its key, whatever the statistics say. Joined to the
 * tokens with `revoked_at IS NULL`, the grant was read through the partial index of live grants (migration 0024),
 * all of it for every token, once ANALYZE had last seen nearly every sign-in ended (after a wave of sign-outs, or
 * with ended sign-ins kept for their retention): a batch of 64 rotations read 100,000 index entries.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('after statistics that saw every sign-in ended, a batch of rotations probes each grant by its key', async () => {
  const q = db.connection.db;
  await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`.execute(q);
  const grants = (from: number, count: number, revoked: boolean) => sql`
    INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, scopes, created_at, last_used_at, expires_at, revoked_at)
    SELECT 'g' || g, 'cli', 'cli', 'acc' || (g % 1000), 1, '["openid","management"]'::jsonb, now(), now(), now() + interval '30 days',
           ${revoked ? sql`now()` : sql`NULL`}
      FROM generate_series(${from}::int, ${from + count - 1}::int) g`;
  const tokens = (from: number, count: number, used: boolean) => sql`
    INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at, used_at)
    SELECT 't' || g, 'g' || g, 1, now(), ${used ? sql`now()` : sql`NULL`} FROM generate_series(${from}::int, ${from + count - 1}::int) g`;
  // Every sign-in ended when ANALYZE looked; then a wave of new ones nobody has analysed yet.
  await grants(1, 20_000, true).execute(q);
  await tokens(1, 20_000, true).execute(q);
  await sql`ANALYZE oauth_grants`.execute(q);
  await sql`ANALYZE oauth_refresh_tokens`.execute(q);
  await grants(20_001, 6_000, false).execute(q);
  await tokens(20_001, 6_000, false).execute(q);

  const batch = Array.from({ length: 64 }, (_, i) => `t${20_001 + i * 7}`);
  const at = new Date().toISOString();
  const plan = await explain(db.connection.pool, ROTATE_REFRESH_TOKENS, [batch, batch.map((_, i) => `n${i}`), batch.map(() => 'cli'), batch.map(() => at)]);
  const nodes = [...planNodes(plan)];
  const indexes = nodes.map((n) => n['Index Name']).filter((name): name is string => typeof name === 'string' && name.startsWith('oauth_grants'));
  assert.ok(indexes.length >= 1, JSON.stringify(plan));
  assert.equal([...new Set(indexes)], ['oauth_grants_pkey'], JSON.stringify(plan));
  assert.not.ok(nodes.some((n) => n['Relation Name'] === 'oauth_grants' && n['Node Type'] === 'Seq Scan'), JSON.stringify(plan));
});

test.run();
