import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { AssertionUses } from '../../identity/assertion-uses.js';
import { ReplayGuard } from '../../identity/device-assertion.js';
import { migrateTo, migrateToLatest } from '../../storage/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rejects } from '../support/assert.js';

/** The durable record of used device-assertion ids: one row per group commit, read back by a starting server. */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

const sorted = (uses: ReadonlyArray<{ id: string; expiresAt: number }>) => [...uses].sort((a, b) => a.id.localeCompare(b.id));

test('ids recorded concurrently share rows, and a new guard on the same store refuses every one of them', async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  const uses = new AssertionUses(db.connection);
  const first = await ReplayGuard.open(clock, uses);
  const ids = Array.from({ length: 40 }, (_, i) => `dev-a:jti-${i}`);
  const answers = await Promise.all(ids.map((id, i) => first.firstUse(id, clock.now() + 60_000 + i)));
  assert.ok(answers.every(Boolean));
  assert.is(await first.firstUse('dev-a:jti-0', clock.now() + 60_000), false, 'memory refuses a replay at once');
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM device_assertion_use_batches`.execute(db.connection.db);
  assert.ok(Number(rows[0]!.n) < ids.length, 'grouped: fewer rows than ids');

  const restarted = await ReplayGuard.open(clock, new AssertionUses(db.connection));
  for (const id of ids) assert.is(await restarted.firstUse(id, clock.now() + 60_000), false, `${id} is refused after a restart`);
  assert.ok(await restarted.firstUse('dev-a:jti-new', clock.now() + 60_000));

  // Past every window: nothing to reload, and the sweep removes what is left.
  clock.advance(2 * 60_000);
  assert.equal(await uses.unexpired(clock.now()), []);
  assert.is(await uses.sweep(clock.now()), ids.length + 1);
});

test('an id whose record could not be written is not spent: the request did not act, so it may come again', async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  let down = true;
  const real = new AssertionUses(db.connection);
  const flaky = {
    record: (id: string, expiresAt: number) => (down ? Promise.reject(new Error('store unreachable')) : real.record(id, expiresAt)),
    unexpired: (now: number) => real.unexpired(now),
  };
  const guard = await ReplayGuard.open(clock, flaky);
  await rejects(() => guard.firstUse('dev-b:jti-1', clock.now() + 60_000), (error) => error instanceof Error && /unreachable/.test(error.message));
  down = false;
  assert.ok(await guard.firstUse('dev-b:jti-1', clock.now() + 60_000));
  assert.is(await guard.firstUse('dev-b:jti-1', clock.now() + 60_000), false);
});

test('migration 0013 carries the ids still inside their window into groups, and back', async () => {
  const other = await createTestDatabase();
  try {
    const { db: kdb } = other.connection;
    await migrateTo(kdb, '0012-device-assertion-uses');
    const live = Date.now() + 60_000;
    await sql`
      INSERT INTO device_assertion_uses (id, expires_at)
      VALUES ('dev:live-1', to_timestamp(${live} / 1000.0)), ('dev:live-2', to_timestamp(${live + 1000} / 1000.0)),
             ('dev:gone', now() - interval '1 minute')`.execute(kdb);
    await migrateToLatest(kdb);
    const carried = await new AssertionUses(other.connection).unexpired(Date.now());
    assert.equal(sorted(carried).map((u) => u.id), ['dev:live-1', 'dev:live-2']);
    assert.ok(carried.every((u) => u.expiresAt >= live), 'kept at least until its own expiry');

    await migrateTo(kdb, '0012-device-assertion-uses');
    const back = await sql<{ id: string }>`SELECT id FROM device_assertion_uses ORDER BY id`.execute(kdb);
    assert.equal(back.rows.map((r) => r.id), ['dev:live-1', 'dev:live-2']);
  } finally {
    await other.drop();
  }
});

test.run();
