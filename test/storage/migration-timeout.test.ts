import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectStorage } from '../../storage/connect.js';
import { migrateDatabase, migrateTo, migrateToLatest } from '../../storage/migrate.js';
import { rejects } from '../support/assert.js';
import { createTestDatabase } from '../support/database.js';

/**
 * Migrations that rewrite a whole table outlast any limit sized for requests: 0011 copies the journal, which only
 * grows. A server migrates on a connection of its own without a statement timeout, so a large journal does not make
 * every start fail. Here the journal is small and the limits are small in proportion: 0011 takes far longer than
 * 100 ms on it, and the database's own default is set to 100 ms, which a connection that sets no limit would inherit.
 */
const EVENTS = 100_000;
const TIMEOUT_MS = 100;

test('a server migrates a journal that outlasts the request statement timeout, whatever the database default', async () => {
  const db = await createTestDatabase();
  try {
    await migrateTo(db.connection.db, '0010-codes-by-browser');
    await sql`
      INSERT INTO actor_journal (kind, key, version, epoch, event, at)
      SELECT 'counter', 'k' || (g / 1000), g % 1000 + 1, 1, '{"type":"tick","n":1}', now() FROM generate_series(0, ${EVENTS - 1}::int) g`.execute(db.connection.db);
    const name = new URL(db.url).pathname.slice(1);
    await sql`ALTER DATABASE ${sql.id(name)} SET statement_timeout = ${sql.lit(`${TIMEOUT_MS}ms`)}`.execute(db.connection.db);

    // Calibration: on a request pool with this limit, as servers used to migrate, 0011 is cancelled and rolled back.
    const requests = connectStorage({ connectionString: db.url, statementTimeoutMs: TIMEOUT_MS });
    try {
      await rejects(() => migrateToLatest(requests.db), (e) => e instanceof Error && /0011-journal-segments failed: canceling statement due to statement timeout/.test(e.message));
    } finally {
      await requests.close();
    }

    const started = Date.now();
    const applied = await migrateDatabase(db.url);
    assert.is(applied[0], '0011-journal-segments', `applied after ${Date.now() - started} ms: ${applied.join(', ')}`);
    const { rows } = await db.connection.pool.query<{ events: number }>('SELECT sum(last_version - version + 1)::int8 AS events FROM actor_journal');
    assert.is(rows[0]?.events, EVENTS);
  } finally {
    await db.drop();
  }
});

test.run();
