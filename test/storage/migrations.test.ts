import pg from 'pg';
import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { migrateDatabase, migrateTo, migrateToLatest } from '../../storage/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The migrations on databases that hold data: every down path restores what its up found, and servers starting at
 * once on a fresh database migrate it once, through the path a server migrates with.
 */
const MIGRATIONS = [
  '0001-core', '0002-signing-keys', '0003-access', '0004-review-host', '0005-runtime', '0006-plugin-settings',
  '0007-plugin-configuration', '0008-plugin-grants', '0009-unused-codes-by-browser', '0010-codes-by-browser',
  '0011-journal-segments', '0012-device-assertion-uses', '0013-assertion-use-batches', '0014-environments-by-origin',
  '0015-code-auth-time-when-asked', '0016-idempotency-claim-tokens', '0017-journal-retention',
  '0018-sweep-indexes', '0019-ended-actors', '0020-codes-by-session', '0021-ended-actors-by-kind', '0022-live-sessions-by-account',
  '0023-browser-sessions-by-browser-account', '0024-live-grants-by-account', '0025-live-grants-by-browser',
  '0026-codes-by-browser-expiry', '0027-refresh-token-supersession', '0028-actor-state-versions', '0029-wake-sessions-without-lease-check', '0030-wake-ended-actors-without-end',
];

/** Tables, columns, constraints, indexes, triggers and functions of `public`, one line each (kysely's own excluded). */
async function schemaOf(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ x: string }>(`
    SELECT 'col ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS x
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT LIKE 'kysely%'
    UNION ALL SELECT 'con ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
      FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text NOT LIKE 'kysely%'
    UNION ALL SELECT 'idx ' || indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename NOT LIKE 'kysely%'
    UNION ALL SELECT 'trg ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL SELECT 'fn ' || proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    ORDER BY 1`);
  return rows.map((r) => r.x);
}

async function withDatabase(run: (db: TestDatabase) => Promise<void>): Promise<void> {
  const db = await createTestDatabase();
  try {
    await run(db);
  } finally {
    await db.drop();
  }
}

test('every down migration restores the schema its up found, with rows in the tables it touches', () =>
  withDatabase(async (db) => {
    const { db: kdb, pool } = db.connection;
    await migrateTo(kdb, MIGRATIONS[0]!);
    const before = new Map<string, string[]>();
    for (const name of MIGRATIONS.slice(1)) {
      before.set(name, await schemaOf(pool));
      await migrateTo(kdb, name);
      if (name === '0010-codes-by-browser') {
        await sql`INSERT INTO actor_journal (kind, key, version, epoch, event, at) VALUES ('k', 'a', 1, 1, '{"n":1}', now()), ('k', 'a', 2, 1, '{"n":2}', now())`.execute(kdb);
      }
      if (name === '0012-device-assertion-uses') {
        await sql`INSERT INTO device_assertion_uses (id, expires_at) VALUES ('d:1', now() + interval '1 hour')`.execute(kdb);
      }
    }
    await sql`INSERT INTO environments (id, origin, owner_account_id) VALUES ('e1', 'https://e.example', 'acc')`.execute(kdb);
    await sql`INSERT INTO oidc_clients (client_id, kind, name, redirect_uris) VALUES ('c1', 'cli', 'cli', '[]')`.execute(kdb);
    await sql`
      INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, account_id, account_epoch, browser_id, auth_time, expires_at)
      VALUES ('h1', 'c1', 'http://x', 'cc', '[]', 'acc', 1, 'b1', NULL, now())`.execute(kdb);
    await sql`INSERT INTO plugin_installations (environment_id, plugin_id, installed_by, installed_at, configuration) VALUES ('e1', 'p', 'acc', now(), '{}')`.execute(kdb);
    await sql`
      INSERT INTO idempotency_records (scope, key, fingerprint, state, claim, expires_at)
      VALUES ('account:a', 'idem-key-0123456789', 'fp', 'pending', 'token', now() + interval '1 minute')`.execute(kdb);
    for (let i = MIGRATIONS.length - 1; i >= 1; i--) {
      await migrateTo(kdb, MIGRATIONS[i - 1]!);
      assert.equal(await schemaOf(pool), before.get(MIGRATIONS[i]!), `down of ${MIGRATIONS[i]}`);
    }
    assert.equal(await migrateToLatest(kdb), MIGRATIONS.slice(1));
  }));

test('0019 gives ended Runtime sessions their end, from the snapshot or the journal after it, and nothing else one', () =>
  withDatabase(async (db) => {
    const { db: kdb } = db.connection;
    await migrateTo(kdb, '0018-sweep-indexes');
    const ended = Date.parse('2026-01-02T03:04:05.678Z');
    const active = JSON.stringify({ value: 'active', context: { endedAt: null } });
    await sql`
      INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers) VALUES
        ('runtime-session', 'ended', 3, 1, ${JSON.stringify({ value: 'released', context: { endedAt: ended } })}::jsonb, '{}'),
        ('runtime-session', 'live', 3, 1, ${active}::jsonb, '{}'),
        ('runtime-session', 'tail-ended', 2, 1, ${active}::jsonb, '{}'),
        ('media-room', 'room', 2, 1, ${JSON.stringify({ value: 'open', context: { endedAt: ended } })}::jsonb, '{}')`.execute(kdb);
    // Released while active, before 0019: that write stored no snapshot, so the end is only in the journal after it.
    const event = (type: string, at: number) => [at, { type, at }];
    await sql`
      INSERT INTO actor_journal (kind, key, version, last_version, epoch, events) VALUES
        ('runtime-session', 'live', 1, 3, 1, ${JSON.stringify([event('session.create', ended), event('session.activated', ended), event('session.presence', ended)])}::json),
        ('runtime-session', 'tail-ended', 1, 2, 1, ${JSON.stringify([event('session.create', ended), event('session.activated', ended)])}::json),
        ('runtime-session', 'tail-ended', 3, 4, 1, ${JSON.stringify([event('session.presence', ended + 1_000), event('session.release', ended + 2_000)])}::json)`.execute(kdb);
    await migrateTo(kdb, '0019-ended-actors');
    const rows = await kdb.selectFrom('actor_snapshots').select(['key', 'ended_at']).orderBy('key').execute();
    assert.equal(rows, [
      { key: 'ended', ended_at: new Date(ended) },
      { key: 'live', ended_at: null },
      { key: 'room', ended_at: null },
      { key: 'tail-ended', ended_at: new Date(ended + 2_000) },
    ]);
  }));

test("0019's index built first, as its comment tells operators (column, then CREATE INDEX CONCURRENTLY): 0019 then applies", () =>
  withDatabase(async (db) => {
    const { db: kdb } = db.connection;
    await migrateTo(kdb, '0018-sweep-indexes');
    await sql`ALTER TABLE actor_snapshots ADD COLUMN ended_at timestamptz`.execute(kdb);
    await sql`CREATE INDEX CONCURRENTLY actor_snapshots_ended ON actor_snapshots (ended_at) WHERE ended_at IS NOT NULL`.execute(kdb);
    await migrateTo(kdb, '0019-ended-actors');
  }));

test('four servers migrating a fresh database at once: one applies every migration, none fails', () =>
  withDatabase(async (db) => {
    await migrateTo(db.connection.db, MIGRATIONS[0]!);
    const outcomes = await Promise.allSettled(Array.from({ length: 4 }, () => migrateDatabase(db.url)));
    const applied = outcomes.map((o) => (o.status === 'fulfilled' ? o.value.length : `error: ${String(o.reason)}`));
    assert.equal([...applied].sort(), [0, 0, 0, MIGRATIONS.length - 1], JSON.stringify(applied));
  }));

test.run();
