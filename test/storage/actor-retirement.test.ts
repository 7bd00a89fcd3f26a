import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import type { ActorHost } from '../../actors/actor-host.js';
import { defineActorKind } from '../../actors/actor-kind.js';
import { ManualClock } from '../../actors/clock.js';
import { ActorFencedError } from '../../actors/errors.js';
import { ActorRetirement, retireJournals } from '../../storage/postgres/actor-retirement.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { rejects } from '../support/assert.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';
import { explain, planNodes } from '../support/query-plan.js';

/**
 * Actors whose kind declares an end are removed, snapshot and journal, once they ended longer ago than the retention
 * period. Real Postgres, real host: the commit that ends an actor stores its end, retirement takes only what is due,
 * the journal's guard allows these deletes for ended actors alone, and a host still holding a retired actor cannot
 * write it back.
 */
const DAY = 24 * 3600_000;

/** A ticket: notes while open, closed once. Notes are still taken when closed, so a stale writer can be shown fenced. */
const ticketMachine = setup({
  types: {
    context: {} as { notes: number; closedAt: number | null },
    events: {} as { type: 'ticket.note'; at: number } | { type: 'ticket.close'; at: number },
  },
}).createMachine({
  id: 'ticket',
  context: { notes: 0, closedAt: null },
  initial: 'open',
  states: {
    open: {
      on: {
        'ticket.note': { actions: assign({ notes: ({ context }) => context.notes + 1 }) },
        'ticket.close': { target: 'closed', actions: assign({ closedAt: ({ event }) => event.at }) },
      },
    },
    closed: {
      on: { 'ticket.note': { actions: assign({ notes: ({ context }) => context.notes + 1 }) } },
    },
  },
});
const ticketKind = defineActorKind({
  name: 'ticket',
  machine: ticketMachine,
  key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
  endedAt: (snapshot) => snapshot.context.closedAt,
  // Snapshots rarely, so the end is stored because it is an end, not because a snapshot was due anyway.
  policy: { snapshotEvery: 1_000 },
});

let db: TestDatabase;
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ db, store } = opened));

const note = { type: 'ticket.note' };
const close = { type: 'ticket.close' };

function started(clock: ManualClock): ActorHost {
  const host = hostFor(store, clock, [ticketKind]);
  host.start();
  return host;
}
/** A ticket with `notes` notes, closed when `closed` (at the clock's time). */
async function ticket(host: ActorHost, key: string, notes: number, closed: boolean): Promise<void> {
  for (let i = 0; i < notes; i++) await host.send('ticket', key, note);
  if (closed) await host.send('ticket', key, close);
}
async function stored(key: string): Promise<{ snapshots: number; segments: number; endedAt: Date | null }> {
  const q = db.connection.db;
  const rows = await q.selectFrom('actor_snapshots').select('ended_at').where('kind', '=', 'ticket').where('key', '=', key).execute();
  const segments = await q.selectFrom('actor_journal').select(sql<string>`count(*)`.as('n')).where('kind', '=', 'ticket').where('key', '=', key).executeTakeFirstOrThrow();
  return { snapshots: rows.length, segments: Number(segments.n), endedAt: rows[0]?.ended_at ?? null };
}
/** Deletes `key`'s journal in a transaction with `setting` on (if any); resolves to the error, if one was raised. */
async function deleteJournal(key: string, setting?: string): Promise<unknown> {
  try {
    await db.connection.db.transaction().execute(async (trx) => {
      if (setting) await sql`SELECT set_config(${setting}, 'on', true)`.execute(trx);
      await trx.deleteFrom('actor_journal').where('kind', '=', 'ticket').where('key', '=', key).execute();
    });
    return undefined;
  } catch (error) {
    return error;
  }
}

test('the guard refuses a retirement delete of a live actor, and any delete of an ended one outside retirement', async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  await ticket(host, 'guard-live', 2, false);
  await ticket(host, 'guard-ended', 2, true);
  await host.drain();
  for (const [key, setting] of [['guard-live', 'registry.actor_retirement'], ['guard-ended', undefined], ['guard-ended', 'registry.journal_retention']] as const) {
    const error = (await deleteJournal(key, setting)) as { code?: string; message?: string } | undefined;
    assert.is(error?.code, '23001', `${key} with ${setting ?? 'no setting'}: ${error?.message}`);
  }
  assert.is((await stored('guard-live')).segments, 2);
  assert.is((await stored('guard-ended')).segments, 3);
});

test('the commit that ends an actor stores its snapshot with the end, between snapshot intervals', async () => {
  const clock = new ManualClock(Date.now());
  const host = started(clock);
  await ticket(host, 'ends', 3, false);
  assert.equal(await stored('ends'), { snapshots: 1, segments: 3, endedAt: null });
  const at = clock.now();
  await host.send('ticket', 'ends', close);
  const after = await stored('ends');
  assert.is(after.endedAt?.getTime(), at);
  assert.is((await store.load('ticket', 'ends'))?.snapshotVersion, 4);
  await host.drain();
});

test('a pass retires what ended before the cutoff, journal and snapshot; live actors and later ends stay', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = started(clock);
  await ticket(host, 'long-ended', 5, true);
  await ticket(host, 'long-open', 5, false);
  clock.advance(35 * DAY);
  await ticket(host, 'just-ended', 2, true);
  await host.drain();

  const retirement = new ActorRetirement(db.connection.db);
  const cutoff = clock.now() - 30 * DAY;
  assert.equal(await retirement.sweep(cutoff, 10_000), { removed: 1, done: true });
  assert.equal(await stored('long-ended'), { snapshots: 0, segments: 0, endedAt: null });
  assert.is(await store.load('ticket', 'long-ended'), undefined);
  assert.is((await stored('long-open')).segments, 5);
  assert.ok((await stored('just-ended')).endedAt);
  // Nothing else is due: the next pass finds nothing.
  assert.is(await retirement.pass(cutoff), 0);
});

test('a host still holding a retired actor cannot write it back: the fence refuses, and the actor reloads as never written', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = started(clock);
  await ticket(host, 'stale', 3, true);
  assert.is(await new ActorRetirement(db.connection.db).pass(clock.now() + 1), 1);

  // Still in this host's memory at version 4: its next write builds on a journal that is gone.
  await rejects(() => host.send('ticket', 'stale', note), (e) => e instanceof ActorFencedError);
  assert.equal(await stored('stale'), { snapshots: 0, segments: 0, endedAt: null });
  const reply = await host.send('ticket', 'stale', note);
  assert.is(reply.version, 1);
  assert.equal((reply.snapshot as { context: unknown }).context, { notes: 1, closedAt: null });
  await host.drain();
});

test('a retired actor read on and on from memory answers as never written within the idle time, and leaves inspection', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = started(clock);
  await ticket(host, 'polled', 2, true);
  assert.is(await new ActorRetirement(db.connection.db).pass(clock.now() + 1), 1);
  // Read (an event it ignores) every minute: reads alone must not keep a retired actor's ended state in memory for good.
  const read = { type: 'ticket.read' };
  let reply = await host.send('ticket', 'polled', read);
  assert.is(reply.version, 3, 'right after the retirement, the activation still holds the ended state');
  for (let minute = 0; minute < 10; minute++) {
    clock.advance(60_000);
    reply = await host.send('ticket', 'polled', read);
  }
  assert.is(reply.version, 0, 'the retired actor still answers from memory after ten minutes of reads');
  assert.equal((reply.snapshot as { context: unknown }).context, { notes: 0, closedAt: null });
  assert.is(host.inspect('ticket', 'polled'), undefined, 'the operator view still finds the retired actor');
  await host.drain();
});

test('a write to an ended actor while its retirement is under way waits for it, then the actor lives on from that write', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = started(clock);
  await ticket(host, 'racing', 2, true);
  // The retirement's transaction, held open after its deletes: the journal is gone, the snapshot row locked and gone.
  const retiring = await db.connection.pool.connect();
  try {
    await retiring.query('BEGIN');
    await retiring.query("SELECT set_config('registry.actor_retirement', 'on', true)");
    const compiled = retireJournals(new Date(clock.now() + 1), 10).compile(db.connection.db);
    assert.equal((await retiring.query(compiled.sql, [...compiled.parameters])).rows, [{ kind: 'ticket', key: 'racing' }]);
    await retiring.query("DELETE FROM actor_snapshots WHERE kind = 'ticket' AND key = 'racing'");
    // A write after the end stores the snapshot, so its commit meets the row lock and waits.
    let settled = false;
    const write = host.send('ticket', 'racing', note).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 300));
    assert.is(settled, false, 'the write did not wait for the retirement');
    await retiring.query('COMMIT');
    assert.is((await write).version, 4);
  } finally {
    retiring.release();
  }
  // The write's snapshot row and segment are the whole actor now: it loads at that version and goes on.
  const loaded = await store.load('ticket', 'racing');
  const context = (loaded?.snapshot as { context: { notes: number; closedAt: number | null } }).context;
  assert.equal([loaded?.snapshotVersion, loaded?.version, context.notes, context.closedAt !== null], [4, 4, 3, true]);
  assert.is((await host.send('ticket', 'racing', note)).version, 5);
  assert.is((await store.load('ticket', 'racing'))?.version, 5);
  await host.drain();
});

test('passes are bounded by actors; a sweep goes pass after pass until nothing is due', async () => {
  // Ended before every other test's actors, so the cutoff below takes these five alone.
  const clock = new ManualClock(Date.now() - 60 * DAY);
  const host = started(clock);
  for (let i = 0; i < 5; i++) await ticket(host, `batch-${i}`, 2, true);
  await host.drain();
  const retirement = new ActorRetirement(db.connection.db, { actorsPerPass: 2 });
  assert.is(await retirement.pass(clock.now() + 1), 2);
  assert.equal(await retirement.sweep(clock.now() + 1, 10_000), { removed: 3, done: true });
  for (let i = 0; i < 5; i++) assert.is((await stored(`batch-${i}`)).snapshots, 0);
});

test('retirement finds ended actors by the partial index, and their segments by the primary key', async () => {
  const q = db.connection.db;
  // Many live actors, one journal segment each: what a healthy database mostly holds.
  await sql`
    INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers)
    SELECT 'plan', 'k' || g, 1, 1, '{}'::jsonb, '{}'::jsonb FROM generate_series(1, 20000) g`.execute(q);
  await sql`
    INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
    SELECT 'plan', 'k' || g, 1, 1, 1, '[[0, {}]]'::json FROM generate_series(1, 20000) g`.execute(q);
  await sql`ANALYZE actor_snapshots, actor_journal`.execute(q);
  const compiled = retireJournals(new Date(), 500).compile(q);
  const plan = await explain(db.connection.pool, compiled.sql, compiled.parameters);
  const scans = [...planNodes(plan)].filter((n) => n['Node Type'] === 'Seq Scan');
  assert.equal(scans.map((n) => n['Relation Name']), [], JSON.stringify(plan));
});

test.run();
