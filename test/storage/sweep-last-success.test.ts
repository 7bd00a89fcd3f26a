import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServerMetrics } from '../../server/metrics.js';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { scheduleSweep } from '../../storage/sweep.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A sweep that hangs, keeps failing or is no longer scheduled counts no run at all, so no rate of its runs shows it:
 * registry_sweep_last_success_timestamp_seconds{sweep} does, as `time() - x` growing past the sweep's interval.
 */
let db: TestDatabase;
let server: TestServer;
withTestServer(test, (started) => ({ db, server } = started));

const quiet = { info: () => {}, warn: () => {} };
const lastSuccess = (text: string, sweep: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`registry_sweep_last_success_timestamp_seconds{sweep="${sweep}"} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

test('the server exports the last success of each scheduled sweep from the start, at 0 before its first run', async () => {
  const text = await (await fetch(`${server.opsUrl}/metrics`)).text();
  assert.match(text, /^# TYPE registry_sweep_last_success_timestamp_seconds gauge$/m);
  for (const sweep of ['idempotency records', 'actor journal', 'ended actors']) {
    assert.is(lastSuccess(text, sweep), 0, `${sweep} in\n${text.split('\n').filter((l) => l.includes('sweep')).join('\n')}`);
  }
});

test('a run over the real store sets it to the time it ended; failed runs after it leave it there', async () => {
  const metrics = createServerMetrics({ liveActors: () => new Map(), unrestorableActors: () => 0, httpInFlight: () => 0 });
  await sql`
    INSERT INTO idempotency_records (scope, key, fingerprint, state, status, headers, body, expires_at)
    VALUES ('account:a', 'expired', 'fp', 'complete', 201, '{}'::jsonb, '\\x'::bytea, now() - interval '1 minute')`.execute(db.connection.db);
  const store = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 60, claimTimeoutSeconds: 60 });
  let runs = 0;
  let failingFrom = Infinity;
  const before = Date.now() / 1000;
  const schedule = scheduleSweep('idempotency records', (signal) => {
    runs++;
    if (runs === 2) failingFrom = Date.now() / 1000;
    if (runs > 1) throw new Error('storage unavailable');
    return store.sweep(signal);
  }, { intervalMs: 5, logger: quiet, observer: metrics.sweeps });
  assert.is(lastSuccess(metrics.render(), 'idempotency records'), 0, 'scheduled, not yet run');
  await waitFor(() => (runs >= 4 ? true : undefined), 'a success, then failed runs');
  await schedule.stop();
  const text = metrics.render();
  const at = lastSuccess(text, 'idempotency records');
  assert.ok(at !== undefined && at >= before && at <= failingFrom, `last success ${at}, expected within [${before}, ${failingFrom}]`);
  assert.match(text, /registry_sweep_runs_total\{outcome="failed",sweep="idempotency records"\} [3-9]/);
});

test('an unfinished run (rows left for the next) is still a success: the sweep is working, only behind', async () => {
  const metrics = createServerMetrics({ liveActors: () => new Map(), unrestorableActors: () => 0, httpInFlight: () => 0 });
  let runs = 0;
  const schedule = scheduleSweep('behind', async () => ({ removed: ++runs, done: false }), {
    intervalMs: 5,
    logger: quiet,
    observer: metrics.sweeps,
  });
  await waitFor(() => (runs >= 1 ? true : undefined), 'a run');
  await schedule.stop();
  assert.ok((lastSuccess(metrics.render(), 'behind') ?? 0) > 0);
});

test.run();
