import { sql, type KyselyPlugin } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { CommitEntry, JournalRecord } from '../../storage/actor-store.js';
import { migrateTo, migrateToLatest } from '../../storage/migrate.js';
import { COMMIT_BATCH, PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { withActorStore } from '../support/host.js';
import { rejects } from '../support/assert.js';
import { waitFor } from '../support/wait.js';

/**
 * The journal as stored: one row per actor per commit (a segment of consecutive versions). What the host sees of it
 * (every event with its own version and time) is the same as when it was a row per event.
 */
let db: TestDatabase;
let store: PostgresActorStore;

withActorStore(test, (opened) => ({ db, store } = opened));

const says = (pattern: RegExp) => (error: unknown) => error instanceof Error && pattern.test(error.message);
const at0 = Date.parse('2026-11-22T10:00:00.000Z');
const records = (from: number, count: number): JournalRecord[] =>
  Array.from({ length: count }, (_, i) => ({ version: from + i, event: { type: 'tick', n: from + i }, at: at0 + from + i }));
const rowsOf = async (key: string) =>
  db.connection.db
    .selectFrom('actor_journal')
    .select(['version', 'last_version'])
    .where('kind', '=', 'counter')
    .where('key', '=', key)
    .orderBy('version')
    .execute();

test('a commit stores an actor\'s events as one row; paging and loading still see every event with its version and time', async () => {
  const commits: CommitEntry[] = [
    { kind: 'counter', key: 'seg', baseVersion: 0, epoch: 1, journal: records(1, 3), snapshot: { version: 3, snapshot: { s: 3 }, timers: {} } },
    { kind: 'counter', key: 'seg', baseVersion: 3, epoch: 1, journal: records(4, 1) },
    { kind: 'counter', key: 'seg', baseVersion: 4, epoch: 1, journal: records(5, 4) },
  ];
  for (const entry of commits) assert.is((await store.commit([entry])).fenced.size, 0);
  assert.equal(await rowsOf('seg'), [
    { version: 1, last_version: 3 },
    { version: 4, last_version: 4 },
    { version: 5, last_version: 8 },
  ]);

  const versions = async (limit: number, beforeVersion?: number) =>
    (await store.readJournal('counter', 'seg', beforeVersion === undefined ? { limit } : { limit, beforeVersion })).map((e) => e.version);
  assert.equal(await versions(3), [8, 7, 6]);
  assert.equal(await versions(3, 7), [6, 5, 4]);
  assert.equal(await versions(10, 3), [2, 1]);
  assert.equal(await versions(10, 1), []);
  const [newest] = await store.readJournal('counter', 'seg', { limit: 1 });
  assert.equal(newest, { version: 8, epoch: 1, event: { type: 'tick', n: 8 }, at: new Date(at0 + 8), stateVersion: 1 });

  const loaded = await store.load('counter', 'seg');
  assert.is(loaded?.snapshotVersion, 3);
  assert.is(loaded?.version, 8);
  assert.equal(loaded?.tail, records(4, 5).map((record) => ({ ...record, stateVersion: 1 })));
});

test('a journal page reads about the events it returns: segments are counted by their events, not taken `limit` at a time', async () => {
  // Twenty commits of 100 events each, as a runtime socket pipelining its messages leaves them.
  for (let i = 0; i < 20; i++) {
    const entry: CommitEntry = { kind: 'counter', key: 'wide', baseVersion: i * 100, epoch: 1, journal: records(i * 100 + 1, 100) };
    assert.is((await store.commit([entry])).fenced.size, 0);
  }
  let rows = 0;
  const counting: KyselyPlugin = {
    transformQuery: (args) => args.node,
    transformResult: async (args) => {
      rows += args.result.rows.length;
      return args.result;
    },
  };
  const measured = new PostgresActorStore({ db: db.connection.db.withPlugin(counting), pool: db.connection.pool });
  const page = async (limit: number, beforeVersion?: number) => {
    rows = 0;
    const entries = await measured.readJournal('counter', 'wide', beforeVersion === undefined ? { limit } : { limit, beforeVersion });
    return { versions: entries.map((e) => e.version), rows };
  };
  const newest = await page(50);
  assert.equal(newest.versions, Array.from({ length: 50 }, (_, i) => 2000 - i));
  assert.ok(newest.rows <= 2, `50 events of one segment read ${newest.rows} segments (${newest.rows * 100} events)`);
  const straddling = await page(150, 1951);
  assert.equal(straddling.versions, Array.from({ length: 150 }, (_, i) => 1950 - i));
  assert.ok(straddling.rows <= 3, `150 events of two segments read ${straddling.rows} segments`);
  const all = await page(500, 301);
  assert.equal(all.versions, Array.from({ length: 300 }, (_, i) => 300 - i), 'a page reaching the first version stops there');
});

test('a commit refuses an entry without events, or a snapshot that is not its last version, before writing anything', async () => {
  const good: CommitEntry = { kind: 'counter', key: 'refused-batch', baseVersion: 0, epoch: 1, journal: records(1, 1) };
  await rejects(() => store.commit([good, { kind: 'counter', key: 'empty', baseVersion: 0, epoch: 1, journal: [] }]), says(/carries no event/));
  const midSnapshot: CommitEntry = {
    kind: 'counter', key: 'mid', baseVersion: 0, epoch: 1, journal: records(1, 2), snapshot: { version: 1, snapshot: {}, timers: {} },
  };
  await rejects(() => store.commit([good, midSnapshot]), says(/not at the end of its journal segment/));
  assert.equal(await rowsOf('refused-batch'), []);
});

test('two writers that saw the journal end at the same version collide, whatever the lengths of their segments', async () => {
  const batch = (count: number) =>
    JSON.stringify([{ kind: 'counter', key: 'race', base: 0, epoch: 1, journal: records(1, count).map((r) => [r.at, r.event]) }]);
  const first = await db.connection.pool.connect();
  const second = await db.connection.pool.connect();
  try {
    await first.query('BEGIN');
    assert.equal((await first.query(COMMIT_BATCH, [batch(3)])).rows, [], 'the first writer passes the fence');
    // The second writer's fence cannot see the first's uncommitted row either; the primary key is what stops it.
    const secondPid = (await second.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const racing = second.query(COMMIT_BATCH, [batch(1)]).then(
      (result) => (result.rows.length > 0 ? 'fenced' : 'committed'),
      (error: { code?: string }) => error.code,
    );
    await waitFor(async () => {
      const waiting = await db.connection.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = $2', [secondPid, 'Lock']);
      return waiting.rows.length > 0;
    }, 'the second writer to wait on the first one\'s journal row');
    await first.query('COMMIT');
    assert.is(await racing, '23505');
  } finally {
    first.release();
    second.release();
  }
  assert.equal(await rowsOf('race'), [{ version: 1, last_version: 3 }]);
});

test('migration 0011 turns each stored event row into a one-event segment, and back', async () => {
  const other = await createTestDatabase();
  try {
    const { db: kdb } = other.connection;
    await migrateTo(kdb, '0010-codes-by-browser');
    await sql`
      INSERT INTO actor_journal (kind, key, version, epoch, event, at)
      VALUES ('counter', 'old', 1, 2, '{"type":"a"}', '2026-11-22T10:00:00.001Z'),
             ('counter', 'old', 2, 2, '{"type":"b"}', '2026-11-22T10:00:00.002Z')`.execute(kdb);
    await sql`
      INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers)
      VALUES ('counter', 'old', 1, 2, '{"s":1}', '{}')`.execute(kdb);
    await migrateToLatest(kdb);

    const migrated = new PostgresActorStore(other.connection);
    const loaded = await migrated.load('counter', 'old');
    assert.equal(loaded?.tail, [{ version: 2, event: { type: 'b' }, at: Date.parse('2026-11-22T10:00:00.002Z'), stateVersion: 1 }]);
    assert.equal((await migrated.readJournal('counter', 'old', { limit: 5 })).map((e) => [e.version, e.epoch, e.event, e.at.toISOString()]), [
      [2, 2, { type: 'b' }, '2026-11-22T10:00:00.002Z'],
      [1, 2, { type: 'a' }, '2026-11-22T10:00:00.001Z'],
    ]);
    await rejects(() => sql`DELETE FROM actor_journal`.execute(kdb), says(/append-only/));

    assert.is((await migrated.commit([{ kind: 'counter', key: 'old', baseVersion: 2, epoch: 2, journal: records(3, 2) }])).fenced.size, 0);
    await migrateTo(kdb, '0010-codes-by-browser');
    const down = await sql<{ version: number; event: unknown; at: Date }>`
      SELECT version, event, at FROM actor_journal WHERE key = 'old' ORDER BY version`.execute(kdb);
    assert.equal(down.rows.map((r) => [r.version, r.event, r.at.getTime()]), [
      [1, { type: 'a' }, Date.parse('2026-11-22T10:00:00.001Z')],
      [2, { type: 'b' }, Date.parse('2026-11-22T10:00:00.002Z')],
      [3, { type: 'tick', n: 3 }, at0 + 3],
      [4, { type: 'tick', n: 4 }, at0 + 4],
    ]);
    await rejects(() => sql`DELETE FROM actor_journal`.execute(kdb), says(/append-only/));
  } finally {
    await other.drop();
  }
});

test.run();
