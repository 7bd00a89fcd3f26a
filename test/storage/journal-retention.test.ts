import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ActorHost } from '../../actors/actor-host.js';
import { defineActorKind } from '../../actors/actor-kind.js';
import { ManualClock } from '../../actors/clock.js';
import { JournalRetention } from '../../storage/postgres/journal-retention.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { hostFor } from '../support/host.js';

/**
 * Journal retention removes the segments an actor's stored snapshot covers once they are older than the retention
 * period; the tail after the snapshot is the actor's state and stays. Real Postgres, real host: the actors load and go
 * on exactly as before, and the journal's guard still refuses every other delete.
 */
const DAY = 24 * 3600_000;
/** Snapshots every 4 events, so a few events leave both covered segments and an uncovered tail. */
const kind = defineActorKind({ ...counterKind, policy: { snapshotEvery: 4 } });
let db: TestDatabase;
let store: PostgresActorStore;

test.before(async () => {
  db = await createTestDatabase();
  store = new PostgresActorStore(db.connection);
});
test.after(async () => {
  await db.drop();
});

const add = (amount: number) => ({ type: 'counter.add', amount });
const totalOf = (snapshot: unknown): number => (snapshot as { context: { total: number } }).context.total;
const versions = async (key: string): Promise<number[]> => (await store.readJournal('counter', key, { limit: 100 })).map((e) => e.version);
/** A started host of the test kind on the shared store. */
function started(clock: ManualClock): ActorHost {
  const host = hostFor(store, clock, [kind]);
  host.start();
  return host;
}
const range = (from: number, to: number): number[] => Array.from({ length: from - to + 1 }, (_, i) => from - i);

test('covered segments past retention go; the tail after the snapshot and recent segments stay; the actor goes on as before', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = started(clock);
  for (let i = 1; i <= 10; i++) await host.send('counter', 'old-a', add(i)); // snapshots at 1, 5, 9
  for (let i = 1; i <= 3; i++) await host.send('counter', 'old-b', add(i)); // snapshot at 1; 2 and 3 are its tail
  clock.advance(35 * DAY);
  for (let i = 11; i <= 15; i++) await host.send('counter', 'old-a', add(i)); // snapshot at 13: covers 10 to 13
  await host.drain();

  const retention = new JournalRetention(db.connection.db);
  assert.equal(await retention.sweep(clock.now() - 30 * DAY, 10_000), { removed: 11, done: true });
  assert.equal(await versions('old-a'), range(15, 11), 'a: 1..10 were covered and old; 11..15 are recent');
  assert.equal(await versions('old-b'), [3, 2], 'b: its snapshot covers only 1; 2 and 3 are its state');
  assert.equal(await retention.sweep(clock.now() - 30 * DAY, 10_000), { removed: 0, done: true });

  const restarted = started(clock);
  const a = await restarted.send('counter', 'old-a', add(16));
  const b = await restarted.send('counter', 'old-b', add(4));
  assert.equal([a.version, totalOf(a.snapshot)], [16, (16 * 17) / 2]);
  assert.equal([b.version, totalOf(b.snapshot)], [4, 10]);
  await restarted.drain();
});

test('a live activation goes on committing after retention removed every segment up to its head', async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  for (let i = 1; i <= 5; i++) await host.send('counter', 'live-c', add(1)); // snapshots at 1 and 5: the head is covered
  const retention = new JournalRetention(db.connection.db);
  assert.ok((await retention.sweep(clock.now() + 1, 10_000)).removed >= 5);
  assert.equal(await versions('live-c'), []);

  // Same activation, still live: its next commit's fence finds the journal's end in the snapshot.
  const next = await host.send('counter', 'live-c', add(1));
  assert.equal([next.version, totalOf(next.snapshot)], [6, 6]);
  await host.drain();
  const restarted = started(clock);
  const after = await restarted.send('counter', 'live-c', add(1));
  assert.equal([after.version, totalOf(after.snapshot)], [7, 7]);
  await restarted.drain();
});

test("the journal's guard still refuses a plain delete, an update, and a retention delete of a segment not covered", async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  for (let i = 1; i <= 3; i++) await host.send('counter', 'guarded', add(1)); // snapshot at 1; 2 and 3 uncovered
  await host.drain();
  const q = db.connection.db;
  const refused = (error: unknown) => (error as { code?: string }).code === '23001';
  await rejects(() => sql`DELETE FROM actor_journal WHERE kind = 'counter' AND key = 'guarded' AND version = 1`.execute(q), refused);
  await rejects(
    () => q.transaction().execute(async (trx) => {
      await sql`SELECT set_config('registry.journal_retention', 'on', true)`.execute(trx);
      await sql`DELETE FROM actor_journal WHERE kind = 'counter' AND key = 'guarded' AND version = 3`.execute(trx);
    }),
    refused,
  );
  await rejects(
    () => q.transaction().execute(async (trx) => {
      await sql`SELECT set_config('registry.journal_retention', 'on', true)`.execute(trx);
      await sql`UPDATE actor_journal SET epoch = epoch WHERE kind = 'counter' AND key = 'guarded' AND version = 1`.execute(trx);
    }),
    refused,
  );
  assert.equal(await versions('guarded'), [3, 2, 1]);
});

test('a cycle walks every actor a page at a time and then starts over', async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  for (const key of ['walk-1', 'walk-2', 'walk-3', 'walk-4', 'walk-5']) await host.send('counter', key, add(1));
  await host.drain();
  const retention = new JournalRetention(db.connection.db, { actorsPerPass: 2 });
  const seen: string[] = [];
  let cursor = undefined as { kind: string; key: string } | undefined;
  let passes = 0;
  do {
    const pass = await retention.pass(cursor, clock.now() + 1);
    cursor = pass.next;
    if (cursor) seen.push(cursor.key);
    passes++;
  } while (cursor && passes < 100);
  assert.ok(seen.includes('walk-2') && seen.includes('walk-4'), seen.join());
  assert.equal([...seen].sort(), seen, 'in key order');
  for (const key of ['walk-1', 'walk-2', 'walk-3', 'walk-4', 'walk-5']) assert.equal(await versions(key), [], key);
});

test.run();
