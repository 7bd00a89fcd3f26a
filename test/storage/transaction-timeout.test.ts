import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectStorage } from '../../storage/connect.js';
import { isStorageOutage } from '../../storage/outage.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A backend that stops answering fails a query at the statement timeout + 2 s, inside a Kysely transaction too
 * (browser sessions, environments, plugin installations, settings and backend grants use them): the ROLLBACK Kysely
 * sends afterwards is not queued on the same silent connection to wait out a second timeout, and the caller hears the
 * query's own failure, an outage.
 */
let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('a transaction on a backend that stopped answering fails within the statement timeout + 2 s, as an outage', async () => {
  const conn = connectStorage({ connectionString: db.url, statementTimeoutMs: 1_000, maxConnections: 1 });
  const { rows } = await conn.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const stopped = rows[0]!.pid;
  try {
    const started = performance.now();
    const outcome = await conn.db
      .transaction()
      .execute(async (trx) => {
        process.kill(stopped, 'SIGSTOP'); // BEGIN was answered; the backend goes silent now
        await sql`SELECT 1`.execute(trx);
      })
      .then(() => 'answered', (error: unknown) => error);
    const ms = Math.round(performance.now() - started);
    assert.instance(outcome, Error);
    assert.ok(isStorageOutage(outcome), String(outcome));
    // One timeout is 3 s (1 s + 2 s); a second one waited out on the rollback would make it 6 s.
    assert.ok(ms < 5_000, `the caller waited ${ms} ms for a 1 s statement timeout (one timeout is 3 s)`);
  } finally {
    process.kill(stopped, 'SIGCONT');
    await conn.close();
  }
});

test.run();
