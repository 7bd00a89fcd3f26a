import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectStorage, type StorageConnection } from '../../storage/connect.js';
import { isStorageOutage } from '../../storage/outage.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The pool's client-side limit: a backend that stops answering (here SIGSTOP; in life a frozen host, or a failover
 * leaving a half-open TCP connection) fails the query shortly after the statement timeout, as an outage, and its
 * connection is closed rather than handed to the next caller.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs `check` with a one-connection pool (statement timeout 1 s) whose backend is stopped, resuming it after. */
async function withStoppedBackend(check: (conn: StorageConnection, stopped: number) => Promise<void>): Promise<void> {
  const conn = connectStorage({ connectionString: db.url, statementTimeoutMs: 1_000, maxConnections: 1 });
  const { rows } = await conn.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const stopped = rows[0]!.pid;
  process.kill(stopped, 'SIGSTOP');
  try {
    await check(conn, stopped);
  } finally {
    process.kill(stopped, 'SIGCONT');
    await conn.close();
  }
}

const within = <T>(work: Promise<T>, ms: number, what: string): Promise<T | string> =>
  Promise.race([work, sleep(ms).then(() => `${what}: still waiting after ${ms} ms`)]);

test('a query to a backend that stopped answering fails within the statement timeout, as an outage', () =>
  withStoppedBackend(async (conn) => {
    const outcome = await within(conn.pool.query('SELECT 1').then(() => 'answered', (error: unknown) => error), 6_000, 'statement timeout 1 s');
    assert.instance(outcome, Error, String(outcome));
    assert.ok(isStorageOutage(outcome), `an outage: ${String(outcome)}`);
  }));

test('a connection whose query timed out is discarded: the next query gets a live backend (Kysely and pool.query)', () =>
  withStoppedBackend(async (conn, stopped) => {
    const pidOf = sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`;
    const first = await within(pidOf.execute(conn.db).then(() => 'answered', (error: unknown) => error), 6_000, 'Kysely');
    assert.instance(first, Error, String(first));
    const next = await within(pidOf.execute(conn.db).then((r) => r.rows[0]!.pid), 6_000, 'Kysely, after the timeout');
    assert.type(next, 'number', String(next));
    assert.is.not(next, stopped);

    process.kill(next as number, 'SIGSTOP');
    try {
      const viaPool = await within(conn.pool.query('SELECT 1').then(() => 'answered', (error: unknown) => error), 6_000, 'pool.query');
      assert.instance(viaPool, Error, String(viaPool));
      const after = await within(conn.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid').then((r) => r.rows[0]!.pid), 6_000, 'pool.query, after the timeout');
      assert.type(after, 'number', String(after));
      assert.ok(after !== stopped && after !== next, `a third backend, got ${String(after)}`);
    } finally {
      process.kill(next as number, 'SIGCONT');
    }
  }));

test.run();
