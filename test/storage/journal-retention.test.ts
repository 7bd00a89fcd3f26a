import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ActorHost } from '../../actors/actor-host.js';
import { defineActorKind } from '../../actors/actor-kind.js';
import { ManualClock } from '../../actors/clock.js';
import { ActorRestoreError } from '../../actors/errors.js';
import { StoredActorInconsistentError } from '../../storage/actor-store.js';
import { JournalRetention, retentionPass } from '../../storage/postgres/journal-retention.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';
import { planNodes, type PlanNode } from '../support/query-plan.js';

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

withActorStore(test, (opened) => ({ db, store } = opened));

const add = (amount: number) => ({ type: 'counter.add', amount });
const totalOf = (snapshot: unknown): number => (snapshot as { context: { total: number } }).context.total;
const versions = async (key: string): Promise<number[]> => (await store.readJournal('counter', key, { limit: 100 })).map((e) => e.version);
/** A started host of the test kind on the shared store. */
function started(clock: ManualClock): ActorHost {
  const host = hostFor(store, clock, [kind]);
  host.start();
  return host;
}
/** Journal rows an EXPLAIN ANALYZE plan read (returned or filtered out, over all loops); a whole-table scan fails. */
function journalRowsRead(plan: PlanNode): number {
  let read = 0;
  for (const node of planNodes(plan)) {
    if (node['Relation Name'] !== 'actor_journal' || node['Node Type'] === 'ModifyTable') continue;
    assert.ok(node['Node Type'] !== 'Seq Scan', JSON.stringify(plan));
    read += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1);
  }
  return read;
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

test('a live activation goes on committing after retention removed every segment it may: all covered ones but the newest', async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  for (let i = 1; i <= 5; i++) await host.send('counter', 'live-c', add(1)); // snapshots at 1 and 5: the head is covered
  const retention = new JournalRetention(db.connection.db);
  await retention.sweep(clock.now() + 1, 10_000);
  assert.equal(await versions('live-c'), [5], 'the newest segment stays: the commit fence reads the journal end from it');

  // Same activation, still live.
  const next = await host.send('counter', 'live-c', add(1));
  assert.equal([next.version, totalOf(next.snapshot)], [6, 6]);
  await host.drain();
  const restarted = started(clock);
  const after = await restarted.send('counter', 'live-c', add(1));
  assert.equal([after.version, totalOf(after.snapshot)], [7, 7]);
  await restarted.drain();
});

test('a clock stepped back: only the prefix before the first young segment goes, and the actor goes on', async () => {
  const t = Date.now();
  const clock = new ManualClock(t);
  const host = started(clock);
  await host.send('counter', 'stepped', add(1)); // segment 1 at t
  clock.advance(-60_000); // the clock corrected backwards, or another node's clock a minute behind
  for (let i = 2; i <= 5; i++) await host.send('counter', 'stepped', add(i)); // 2..5 at t − 60 s, snapshot at 5
  await host.drain();
  // 2..4 look older than 1; removing them would leave 1 and 5 with a hole between.
  await new JournalRetention(db.connection.db).sweep(t - 30_000, 10_000);
  assert.equal(await versions('stepped'), [5, 4, 3, 2, 1]);
  const restarted = started(new ManualClock(t + 60_000));
  const reply = await restarted.send('counter', 'stepped', add(6));
  assert.equal([reply.version, totalOf(reply.snapshot)], [6, 21]);
  await restarted.drain();
});

test('a load racing a commit and a retention pass reads one consistent state', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = started(clock);
  for (let i = 1; i <= 4; i++) await host.send('counter', 'raced', add(i)); // snapshot at 1; 2..4 its old tail
  clock.advance(40 * DAY);
  // An inspector (the operator view: readCommitted → store.load) whose load is held right after its first answer.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let reached!: () => void;
  const atGate = new Promise<void>((resolve) => (reached = resolve));
  let held = false;
  // Loads go through the store's load pool: this one answers the first query, then holds that answer at the gate.
  const pool = db.connection.pool;
  const holdingPool = new Proxy(pool, {
    get(target, property) {
      if (property === 'query') {
        return async (...args: Parameters<typeof pool.query>) => {
          const result: unknown = await (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
          if (!held) {
            held = true;
            reached();
            await gate;
          }
          return result;
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const inspector = hostFor(new PostgresActorStore({ db: db.connection.db, pool, loadPool: holdingPool }), clock, [kind]);
  const viewing = inspector.readCommitted('counter', 'raced');
  await atGate;
  await host.send('counter', 'raced', add(5)); // commits 5 with a snapshot that covers 2..4
  await new JournalRetention(db.connection.db).sweep(clock.now() - 30 * DAY, 10_000);
  release();
  const view = (await viewing)!;
  await host.drain();
  // Read before the commit or after it, but whole: the sum of 1..version.
  assert.is(totalOf(view.state), (view.version * (view.version + 1)) / 2, `version ${view.version}, total ${totalOf(view.state)}`);
  assert.equal(await versions('raced'), [5]);
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

test('a cycle walks every actor a page at a time, then the next one starts over', async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  const keys = ['walk-1', 'walk-2', 'walk-3', 'walk-4', 'walk-5'];
  for (const key of keys) for (let i = 0; i < 5; i++) await host.send('counter', key, add(1)); // snapshots at 1 and 5
  const retention = new JournalRetention(db.connection.db, { actorsPerPass: 2 });
  const seen: string[] = [];
  let cursor = undefined as { kind: string; key: string } | undefined;
  for (let passes = 0; passes < 100; passes++) {
    const pass = await retention.pass(cursor, clock.now() + 1);
    if (pass.cycleEnded) break;
    cursor = pass.next;
    seen.push(cursor!.key);
  }
  assert.ok(seen.includes('walk-2') && seen.includes('walk-4'), seen.join());
  assert.equal([...seen].sort(), seen, 'in key order');
  for (const key of keys) assert.equal(await versions(key), [5], key);

  // The sweeps' own cursor: a cycle ends, and the next sweep walks from the first actor again.
  assert.is((await retention.sweep(clock.now() + 1, 10_000)).done, true);
  for (let i = 0; i < 4; i++) await host.send('counter', 'walk-1', add(1)); // snapshot at 9
  await host.drain();
  assert.is((await retention.sweep(clock.now() + 1, 10_000)).done, true);
  assert.equal(await versions('walk-1'), [9]);
});

test('once caught up, a pass reads about two journal rows an actor, however many recent segments each keeps', async () => {
  const q = db.connection.db;
  const now = Date.now();
  const actors = 200;
  await sql`INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot) SELECT 'busy', 'b' || lpad(a::text, 4, '0'), 50, 1, '{}'::jsonb FROM generate_series(1, ${actors}::int) a`.execute(q);
  await sql`
    INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
    SELECT 'busy', 'b' || lpad(a::text, 4, '0'), v, v, 1, json_build_array(json_build_array(${now}::int8, json_build_object('type', 'x')))
      FROM generate_series(1, ${actors}::int) a, generate_series(1, 50) v`.execute(q);
  await sql`ANALYZE actor_journal, actor_snapshots`.execute(q);
  const plan = await q.transaction().execute(async (trx) => {
    await sql`SELECT set_config('registry.journal_retention', 'on', true)`.execute(trx);
    const statement = retentionPass({ kind: 'busy', key: '' }, now - 30 * DAY, actors, 5_000).compile(trx);
    const { rows } = await trx.executeQuery<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>({
      ...statement,
      sql: `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}`,
    });
    return rows[0]!['QUERY PLAN'][0]!.Plan;
  });
  const read = journalRowsRead(plan);
  assert.ok(read <= 3 * actors, `read ${read} journal rows for ${actors} actors`);
  const kept = await sql<{ n: string }>`SELECT count(*) AS n FROM actor_journal WHERE kind = 'busy'`.execute(q);
  assert.is(Number(kept.rows[0]!.n), actors * 50);
});

test('an old backlog is read a pass\'s worth at a time: a capped pass reads about three times its cap, and stays on its page', async () => {
  const q = db.connection.db;
  const old = Date.now() - 40 * DAY;
  const backlog = async (key: string, segments: number): Promise<void> => {
    await sql`INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot) VALUES ('deep', ${key}, ${segments}, 1, '{}'::jsonb)`.execute(q);
    await sql`
      INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
      SELECT 'deep', ${key}, v, v, 1, json_build_array(json_build_array(${old}::int8, json_build_object('type', 'x')))
        FROM generate_series(1, ${segments}::int) v`.execute(q);
  };
  await backlog('d1', 3_000);
  await backlog('d2', 10);
  await sql`ANALYZE actor_journal, actor_snapshots`.execute(q);
  const cap = 500;
  const from = { kind: 'deep', key: '' };

  // EXPLAIN ANALYZE runs the delete: the transaction is rolled back (by throwing the plan out of it).
  class RolledBack {
    constructor(readonly plan: PlanNode) {}
  }
  const plan = await q.transaction().execute(async (trx) => {
    await sql`SELECT set_config('registry.journal_retention', 'on', true)`.execute(trx);
    const statement = retentionPass(from, Date.now() - 30 * DAY, 2, cap).compile(trx);
    const { rows } = await trx.executeQuery<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>({ ...statement, sql: `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}` });
    throw new RolledBack(rows[0]!['QUERY PLAN'][0]!.Plan);
  }).then(
    (): never => {
      throw new Error('the transaction was meant to roll back');
    },
    (error: unknown) => {
      if (error instanceof RolledBack) return error.plan;
      throw error;
    },
  );
  assert.ok(journalRowsRead(plan) <= 4 * cap, `read ${journalRowsRead(plan)} journal rows for a pass capped at ${cap}`);

  const retention = new JournalRetention(q, { actorsPerPass: 2, segmentsPerPass: cap });
  let cursor: { kind: string; key: string } | undefined = from;
  let capped = 0;
  let removed = 0;
  for (let passes = 0; passes < 20; passes++) {
    const pass = await retention.pass(cursor, Date.now() - 30 * DAY);
    removed += pass.removed;
    if (pass.removed >= cap) {
      capped++;
      assert.equal(pass.next, cursor, 'a capped pass leaves its page for the next pass');
    }
    if (pass.cycleEnded || pass.next?.kind !== 'deep') break;
    cursor = pass.next;
  }
  assert.equal([removed, capped], [2_999 + 9, 6], 'all but the newest of each, 500 a pass');
  const left = await sql<{ key: string; version: number }>`SELECT key, version FROM actor_journal WHERE kind = 'deep' ORDER BY key`.execute(q);
  assert.equal(left.rows.map((r) => `${r.key}@${r.version}`), ['d1@3000', 'd2@10'], 'each keeps its newest segment only');
});

test('a stored journal with a gap after its snapshot is refused as needing an operator, not retried as an outage', async () => {
  const q = db.connection.db;
  await sql`INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot) VALUES ('counter', 'gapped', 3, 1, '{}'::jsonb)`.execute(q);
  await sql`
    INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
    VALUES ('counter', 'gapped', 10, 10, 1, json_build_array(json_build_array(0, json_build_object('type', 'counter.add', 'amount', 1))))`.execute(q);
  const host = started(new ManualClock(Date.now()));
  const notRetryable = (error: unknown) =>
    error instanceof ActorRestoreError && !error.retryable && error.cause instanceof StoredActorInconsistentError;
  await rejects(() => host.send('counter', 'gapped', add(1)), notRetryable, 'an event');
  await rejects(() => host.readCommitted('counter', 'gapped'), notRetryable, 'the operator view');
  await host.drain();
});

test.run();
