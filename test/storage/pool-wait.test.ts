import net from 'node:net';
import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectStorage } from '../../storage/connect.js';
import { isStorageOutage } from '../../storage/outage.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Waiting for a connection of a full pool and opening a connection have different limits: more queries than
 * connections (a burst of activations on a loaded machine) queue for as long as a query may run, while a server that
 * does not answer a new connection is given up after a few seconds, as an outage.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('a caller that waits longer than a connect may take for a connection of a full pool gets one', async () => {
  const conn = connectStorage({ connectionString: db.url, maxConnections: 1, statementTimeoutMs: 30_000 });
  try {
    // The only connection stays busy longer than the 5 s a new connection may take to open.
    const busy = sql`SELECT pg_sleep(6)`.execute(conn.db);
    const waiting = sql<{ one: number }>`SELECT 1 AS one`.execute(conn.db).then((r) => r.rows[0]!.one, (error: unknown) => error);
    await busy;
    assert.is(await waiting, 1, `the queued query failed: ${String(await waiting)}`);
  } finally {
    await conn.close();
  }
});

test('opening a connection to a server that never answers is given up after seconds, as an outage', async () => {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => void sockets.add(socket)).listen(0, '127.0.0.1');
  await new Promise((resolve) => silent.once('listening', resolve));
  const { port } = silent.address() as net.AddressInfo;
  // A statement timeout far beyond the connect limit: the connect limit, not the wait for a connection, must end it.
  const conn = connectStorage({ connectionString: `postgres://nobody:x@127.0.0.1:${port}/none`, statementTimeoutMs: 120_000 });
  try {
    const started = Date.now();
    const outcome = await sql`SELECT 1`.execute(conn.db).then(() => 'answered', (error: unknown) => error);
    const ms = Date.now() - started;
    assert.instance(outcome, Error, String(outcome));
    assert.ok(isStorageOutage(outcome), `an outage: ${String(outcome)}`);
    assert.ok(ms < 60_000, `gave up after ${ms} ms`);
  } finally {
    await conn.close();
    for (const socket of sockets) socket.destroy();
    silent.close();
  }
});

test.run();
