import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccessRecordSweep } from '../../identity/access-sweep.js';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { createServerMetrics } from '../../server/metrics.js';
import { scheduleSweep, SWEEP_BATCH, sweepInTurn } from '../../storage/sweep.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/wait.js';

/**
 * A sweep run removes everything that has fallen due, however much piled up since the last run, in statements of
 * SWEEP_BATCH rows. Each sweep used to run one bounded statement per interval (1,000 idempotency records a minute,
 * 5,000 codes every ten minutes): a server taking more than that many idempotent requests or sign-ins kept a backlog
 * that only grew.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

const count = async (table: string): Promise<number> =>
  Number((await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(db.connection.db)).rows[0]!.n);

test('one idempotency sweep removes an expired backlog several batches deep and keeps the live records', async () => {
  const backlog = 2 * SWEEP_BATCH + 1_234;
  await sql`
    INSERT INTO idempotency_records (scope, key, fingerprint, state, status, headers, body, expires_at)
    SELECT 'account:a', 'expired-' || g, 'fp', 'complete', 201, '{}'::jsonb, '\\x'::bytea, now() - interval '1 minute'
      FROM generate_series(1, ${backlog}::int) g`.execute(db.connection.db);
  await sql`
    INSERT INTO idempotency_records (scope, key, fingerprint, state, status, headers, body, expires_at)
    SELECT 'account:a', 'live-' || g, 'fp', 'complete', 201, '{}'::jsonb, '\\x'::bytea, now() + interval '1 hour'
      FROM generate_series(1, 5) g`.execute(db.connection.db);
  const store = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 60, claimTimeoutSeconds: 60 });

  assert.equal(await store.sweep(), { removed: backlog, done: true });
  assert.is(await count('idempotency_records'), 5);
  assert.equal(await store.sweep(), { removed: 0, done: true });
});

test('one access sweep removes a backlog of expired codes and ended sessions several batches deep, and ended Review Host capabilities', async () => {
  const q = db.connection.db;
  await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('cli', 'cli', 'CLI', '[]'::jsonb)`.execute(q);
  const backlog = 2 * SWEEP_BATCH + 321;
  await sql`
    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id,
                             auth_time, expires_at)
    SELECT 'c' || g, 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc', 1, 'brw', now(), now() - interval '2 days'
      FROM generate_series(1, ${backlog}::int) g`.execute(q);
  await sql`
    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id,
                             auth_time, expires_at)
    VALUES ('fresh', 'cli', 'http://127.0.0.1/cb', 'x', '[]'::jsonb, 'acc', 1, 'brw', now(), now() + interval '1 minute')`.execute(q);
  const ended = SWEEP_BATCH + 77;
  await sql`
    INSERT INTO browser_sessions (id, kind, secret_hash, browser_id, account_id, account_epoch, created_at, expires_at)
    SELECT 'bs' || g, 'page', 'h' || g, 'brw', 'acc', 1, now() - interval '3 days', now() - interval '2 days'
      FROM generate_series(1, ${ended}::int) g`.execute(q);
  // Review Host capabilities: one expired, one revoked (both over a day ago), one live.
  await sql`
    INSERT INTO review_host_capabilities (id, secret_hash, account_id, device_id, created_at, expires_at, revoked_at)
    VALUES ('rhc_expired', 'h1', 'acc', 'dev', now() - interval '3 days', now() - interval '2 days', NULL),
           ('rhc_revoked', 'h2', 'acc', 'dev', now() - interval '3 days', now() + interval '1 day', now() - interval '2 days'),
           ('rhc_live', 'h3', 'acc', 'dev', now(), now() + interval '1 day', NULL)`.execute(q);

  const outcome = await new AccessRecordSweep(q).run(Date.now());
  assert.equal(outcome, { removed: backlog + ended + 2, done: true });
  assert.equal((await q.selectFrom('review_host_capabilities').select('id').execute()).map((r) => r.id), ['rhc_live']);
  assert.equal((await q.selectFrom('oauth_codes').select('code_hash').execute()).map((r) => r.code_hash), ['fresh']);
  assert.is(await count('browser_sessions'), 0);
});

test('tables take turns: one whose rows never stop falling due does not starve the others', async () => {
  const calls = { flood: 0, trickle: 0 };
  const outcome = await sweepInTurn(
    [
      async (limit) => (calls.flood++, limit),
      async (limit) => (++calls.trickle <= 2 ? limit : limit - 1),
    ],
    { limit: 10, budgetMs: 200 },
  );
  assert.is(outcome.done, false);
  assert.is(calls.trickle, 3, 'the second table was swept to the end');
  assert.ok(calls.flood > 3);
});

test('a scheduled sweep runs one at a time, and stopping waits for the run in flight and starts no other', async () => {
  const log: string[] = [];
  let running = 0;
  const quiet = { info: () => {}, warn: () => {} };
  const schedule = scheduleSweep('test', async () => {
    running++;
    log.push(`start ${running}`);
    await new Promise((resolve) => setTimeout(resolve, 60));
    running--;
    log.push('end');
    return { removed: 0, done: true };
  }, { intervalMs: 5, logger: quiet });
  await new Promise((resolve) => setTimeout(resolve, 30));
  await schedule.stop();
  const stoppedAt = log.length;
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(log, ['start 1', 'end']);
  assert.is(log.length, stoppedAt, 'nothing ran after stop');
});

test('stopping aborts a long run between its statements instead of waiting out its budget', async () => {
  let statements = 0;
  const quiet = { info: () => {}, warn: () => {} };
  const slowFlood = async (limit: number): Promise<number> => {
    statements++;
    await new Promise((resolve) => setTimeout(resolve, 20));
    return limit;
  };
  const schedule = scheduleSweep('flood', (signal) => sweepInTurn([slowFlood], { limit: 10, budgetMs: 60_000, signal }), { intervalMs: 1, logger: quiet });
  await waitFor(() => (statements >= 3 ? true : undefined), 'the run under way');
  const asked = performance.now();
  await schedule.stop();
  assert.ok(performance.now() - asked < 1_000, `stop took ${Math.round(performance.now() - asked)} ms of a 60 s budget`);
});

test('a sweep that throws instead of rejecting is a failed run, logged, and the next run comes', async () => {
  const warnings: string[] = [];
  let runs = 0;
  const schedule = scheduleSweep('thrower', () => {
    runs++;
    throw new Error('not a promise');
  }, { intervalMs: 5, logger: { info: () => {}, warn: (_details, message) => void warnings.push(message) } });
  await waitFor(() => (runs >= 2 ? true : undefined), 'a second run after the first threw');
  await schedule.stop();
  assert.ok(warnings.length >= 1 && warnings.every((w) => w.startsWith('sweep failed')), warnings.join('; '));
});

test('the first run comes after firstRunMs, not a whole interval: a server restarted often still sweeps', async () => {
  let runs = 0;
  const schedule = scheduleSweep('first', async () => ({ removed: runs++, done: true }), {
    intervalMs: 3_600_000,
    firstRunMs: 5,
    logger: { info: () => {}, warn: () => {} },
  });
  await waitFor(() => (runs >= 1 ? true : undefined), 'the first run, long before an hour');
  await schedule.stop();
  assert.is(runs, 1, 'and the next only an interval later');
});

test('each run is counted in the server metrics: done, unfinished or failed, and the rows it removed', async () => {
  const metrics = createServerMetrics({ liveActors: () => new Map(), unrestorableActors: () => 0, httpInFlight: () => 0 });
  const outcomes = [{ removed: 3, done: true }, { removed: 5, done: false }];
  let runs = 0;
  const schedule = scheduleSweep('counted', async () => {
    const outcome = outcomes[runs++];
    if (!outcome) throw new Error('storage unavailable');
    return outcome;
  }, { intervalMs: 5, logger: { info: () => {}, warn: () => {} }, observer: metrics.sweeps });
  await waitFor(() => (runs >= 3 ? true : undefined), 'three runs');
  await schedule.stop();
  const text = metrics.render();
  for (const line of [
    'registry_sweep_runs_total{outcome="done",sweep="counted"} 1',
    'registry_sweep_runs_total{outcome="unfinished",sweep="counted"} 1',
    'registry_sweep_rows_removed_total{sweep="counted"} 8',
  ]) {
    assert.ok(text.includes(line), `${line} in\n${text.split('\n').filter((l) => l.includes('sweep')).join('\n')}`);
  }
  // Failing runs go on every interval until stopped: one at least.
  assert.match(text, /registry_sweep_runs_total\{outcome="failed",sweep="counted"\} [1-9]/);
});

test('a cycling sweep (the journal\'s): a run left unfinished is `continuing`, with no warning, and a finished cycle rests restMs', async () => {
  const metrics = createServerMetrics({ liveActors: () => new Map(), unrestorableActors: () => 0, httpInFlight: () => 0 });
  const warnings: unknown[] = [];
  const outcomes = [{ removed: 2, done: false }, { removed: 1, done: true }];
  const startedAt: number[] = [];
  const schedule = scheduleSweep('cycling', async () => {
    startedAt.push(performance.now());
    return outcomes[startedAt.length - 1] ?? { removed: 0, done: true };
  }, { intervalMs: 5, restMs: 400, unfinishedIsNormal: true, logger: { info: () => {}, warn: (...args: unknown[]) => warnings.push(args) }, observer: metrics.sweeps });
  await waitFor(() => (startedAt.length >= 3 ? true : undefined), 'the run after the rest');
  await schedule.stop();
  const text = metrics.render();
  assert.ok(text.includes('registry_sweep_runs_total{outcome="continuing",sweep="cycling"} 1'), text);
  assert.not.ok(text.includes('outcome="unfinished",sweep="cycling"'));
  assert.equal(warnings, []);
  assert.ok(startedAt[1]! - startedAt[0]! < 300, 'an unfinished cycle goes on an interval later');
  assert.ok(startedAt[2]! - startedAt[1]! >= 390, `a finished one rests: ${Math.round(startedAt[2]! - startedAt[1]!)} ms`);
});

test.run();
