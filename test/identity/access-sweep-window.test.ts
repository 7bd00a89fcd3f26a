import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccessRecordSweep } from '../../identity/access-sweep.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { planNodes, type PlanNode } from '../support/query-plan.js';

/**
 * The refresh tokens of ended grants go a day after the end, and the grants themselves only after 30 days: for 29 days
 * every ended grant is one the token statement finds but whose tokens are already gone. Looking at every ended grant
 * on every run (every ten minutes) read a month of sign-ins each time, however few were due; a run looks only at the
 * grants that ended since the previous run finished (the first run of a process at all of them).
 */
let db: TestDatabase;
const DAY = 24 * 3600_000;
const ENDED = 20_000;

test.before(async () => {
  db = await createTestDatabase();
  const q = db.connection.db;
  await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`.execute(q);
  await sql`ANALYZE`.execute(q);
});
test.after(async () => {
  await db.drop();
});

const grants = async (prefix: string, count: number, endedAt: number, withToken: boolean, revoked = false): Promise<void> => {
  const q = db.connection.db;
  const at = new Date(endedAt);
  await sql`
    INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, scopes, created_at, last_used_at, expires_at, revoked_at)
    SELECT ${prefix} || g, 'cli', 'cli', 'acc', 1, '[]'::jsonb, ${at}::timestamptz - interval '1 hour', ${at}::timestamptz - interval '1 hour',
           ${revoked ? sql`${at}::timestamptz + interval '30 days'` : sql`${at}::timestamptz`}, ${revoked ? sql`${at}::timestamptz` : sql`NULL`}
      FROM generate_series(1, ${count}::int) g`.execute(q);
  if (withToken) {
    await sql`
      INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
      SELECT 'rt-' || ${prefix} || g, ${prefix} || g, 1, ${at}::timestamptz - interval '1 hour' FROM generate_series(1, ${count}::int) g`.execute(q);
  }
};

/** Grant rows the refresh-token statement reads at `now`, run and rolled back. */
const grantRowsRead = async (sweep: AccessRecordSweep, now: number): Promise<number> => {
  const statement = sweep.statements(now).find(([table]) => table === 'oauth_refresh_tokens')![1];
  const compiled = statement(5_000).compile(db.connection.db);
  const client = await db.connection.pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${compiled.sql}`, [...compiled.parameters]);
    const plan = rows[0]!['QUERY PLAN'][0]!.Plan;
    return [...planNodes(plan)]
      .filter((n) => n['Relation Name'] === 'oauth_grants' && n['Node Type'] !== 'Bitmap Index Scan')
      .reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1), 0);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
};

const tokensOf = async (prefix: string): Promise<number> =>
  Number((await sql<{ n: string }>`SELECT count(*) AS n FROM oauth_refresh_tokens WHERE grant_id LIKE ${`${prefix}%`}`.execute(db.connection.db)).rows[0]!.n);

test('after a finished run, the next looks only at the grants that ended since, and still removes their tokens', async () => {
  const now = Date.now();
  // A month of ended sign-ins whose tokens went long ago, and a few a day and a half past their end with tokens still.
  await grants('old-', ENDED, now - 10 * DAY, false);
  await grants('due-', 5, now - 1.5 * DAY, true);
  await sql`ANALYZE`.execute(db.connection.db);
  const sweep = new AccessRecordSweep(db.connection.db);
  assert.equal(await sweep.run(now), { removed: 5, done: true });
  assert.is(await tokensOf('due-'), 0);

  // Ten minutes on: grants that ended (expired, and revoked) just after the last run's cutoff now fall due.
  const next = now + 10 * 60_000;
  await grants('exp-', 3, now - DAY + 5 * 60_000, true);
  await grants('rev-', 2, now - DAY + 6 * 60_000, true, true);
  // A live grant keeps its tokens whatever the window.
  await grants('live-', 2, next + 20 * DAY, true);
  const read = await grantRowsRead(sweep, next);
  assert.ok(read < 100, `the token statement read ${read} grants`);
  assert.equal(await sweep.run(next), { removed: 5, done: true });
  assert.equal([await tokensOf('exp-'), await tokensOf('rev-'), await tokensOf('live-')], [0, 0, 2]);
});

test('a run that did not finish does not move the window: what it left is found by the next', async () => {
  const now = Date.now() + 3 * DAY;
  const sweep = new AccessRecordSweep(db.connection.db);
  const stopped = new AbortController();
  stopped.abort();
  await grants('cut-', 4, now - 1.5 * DAY, true);
  assert.equal(await sweep.run(now, stopped.signal), { removed: 0, done: false });
  assert.is((await sweep.run(now + 10 * 60_000)).done, true);
  assert.is(await tokensOf('cut-'), 0);
});

test.run();
