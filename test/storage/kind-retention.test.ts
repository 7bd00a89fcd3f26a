import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import type { ActorHost } from '../../actors/actor-host.js';
import { defineActorKind, type ActorKind } from '../../actors/actor-kind.js';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKind } from '../../actors/media.actors.js';
import { retentionCutoffs } from '../../server/actor-retention.js';
import { ActorRetirement, retireJournals } from '../../storage/postgres/actor-retirement.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { JournalRetention } from '../../storage/postgres/journal-retention.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';
import { explain, planNodes } from '../support/query-plan.js';

/**
 * A kind may keep its history for less than the server does (ActorKind.retention): Media rooms, whose contract calls
 * session state ephemeral. Real Postgres, real host: the shorter kind's covered segments and ended actors go at its own
 * cutoff, the other kinds' stay until the server's, and the server's "keep everything" (0 days) does not keep them.
 */
const HOUR = 3600_000;
const DAY = 24 * HOUR;

const noteMachine = setup({
  types: {
    context: {} as { notes: number; closedAt: number | null },
    events: {} as { type: 'note'; at: number } | { type: 'close'; at: number },
  },
}).createMachine({
  id: 'notes',
  context: { notes: 0, closedAt: null },
  on: {
    note: { actions: assign({ notes: ({ context }) => context.notes + 1 }) },
    close: { actions: assign({ closedAt: ({ event }) => event.at }) },
  },
});
const kindOf = (name: string, retention?: ActorKind['retention']): ActorKind =>
  defineActorKind({
    name,
    machine: noteMachine,
    key: { pattern: /^[a-z0-9-]{1,64}$/, describe: 'lower-case name' },
    endedAt: (snapshot) => snapshot.context.closedAt,
    // A snapshot every two events: segments become covered (and so removable) quickly.
    policy: { snapshotEvery: 2 },
    ...(retention ? { retention } : {}),
  });
const brief = kindOf('brief', { journalMs: HOUR, endedMs: HOUR });
const lasting = kindOf('lasting');

let db: TestDatabase;
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ db, store } = opened));

function started(clock: ManualClock): ActorHost {
  const host = hostFor(store, clock, [brief, lasting]);
  host.start();
  return host;
}
async function rows(kind: string, key: string): Promise<{ snapshots: number; segments: number }> {
  const q = db.connection.db;
  const snapshots = await q.selectFrom('actor_snapshots').select(sql<string>`count(*)`.as('n')).where('kind', '=', kind).where('key', '=', key).executeTakeFirstOrThrow();
  const segments = await q.selectFrom('actor_journal').select(sql<string>`count(*)`.as('n')).where('kind', '=', kind).where('key', '=', key).executeTakeFirstOrThrow();
  return { snapshots: Number(snapshots.n), segments: Number(segments.n) };
}

test('a kind declares only positive retentions, and an ended retention only with endedAt', () => {
  assert.throws(() => kindOf('zero', { journalMs: 0 }), /retention.journalMs must be a positive/);
  assert.throws(() => kindOf('fraction', { endedMs: 1.5 }), /retention.endedMs must be a positive/);
  assert.throws(
    () => defineActorKind({ name: 'endless', machine: noteMachine, key: { pattern: /^a$/, describe: 'a' }, retention: { endedMs: HOUR } }),
    /retention.endedMs needs endedAt/,
  );
});

test('cutoffs: a shorter kind gets its own, also when the server keeps everything; a kind keeping longer than the server gets none', () => {
  const now = 100 * DAY;
  const longer = kindOf('longer', { journalMs: 60 * DAY, endedMs: 60 * DAY });
  const days30 = retentionCutoffs([brief, lasting, longer], { journalDays: 30, endedDays: 30 }, now);
  assert.equal(days30.journal, { before: now - 30 * DAY, kinds: { brief: now - HOUR } });
  assert.equal(days30.ended, { before: now - 30 * DAY, kinds: [{ kind: 'brief', before: now - HOUR }] });
  const keepAll = retentionCutoffs([brief, lasting, longer], { journalDays: 0, endedDays: 0 }, now);
  assert.equal(keepAll.journal, { before: 0, kinds: { brief: now - HOUR, longer: now - 60 * DAY } });
  assert.equal(keepAll.ended, { kinds: [{ kind: 'brief', before: now - HOUR }, { kind: 'longer', before: now - 60 * DAY }] });
  assert.equal(retentionCutoffs([lasting], { journalDays: 0, endedDays: 0 }, now), { journal: undefined, ended: undefined });
});

test('the Media room kind keeps its history an hour (media-plugin.md: session state is ephemeral)', () => {
  const kind = mediaRoomKind(() => {});
  assert.is(kind.name, MEDIA_ROOM_KIND);
  assert.equal(kind.retention, { journalMs: HOUR, endedMs: HOUR });
  const cutoffs = retentionCutoffs([kind], { journalDays: 30, endedDays: 0 }, 10 * DAY);
  assert.equal(cutoffs.journal?.kinds, { [MEDIA_ROOM_KIND]: 10 * DAY - HOUR });
  assert.equal(cutoffs.ended, { kinds: [{ kind: MEDIA_ROOM_KIND, before: 10 * DAY - HOUR }] });
});

test("journal retention: the shorter kind's covered segments go at its cutoff, the other kind's stay until the server's", async () => {
  const clock = new ManualClock(Date.now() - 3 * HOUR);
  const host = started(clock);
  for (const kind of ['brief', 'lasting']) for (let i = 0; i < 5; i++) await host.send(kind, 'j', { type: 'note' });
  await host.drain();
  const before = { brief: await rows('brief', 'j'), lasting: await rows('lasting', 'j') };
  const now = Date.now();
  const { journal } = retentionCutoffs([brief, lasting], { journalDays: 30, endedDays: 30 }, now);
  assert.equal(await new JournalRetention(db.connection.db).sweep(journal!.before, 10_000, undefined, journal!.kinds), { removed: 4, done: true });
  // Five events, a snapshot at the fourth: four covered segments, the fifth is the actor's state and stays.
  assert.equal(await rows('brief', 'j'), { snapshots: 1, segments: before.brief.segments - 4 });
  assert.equal(await rows('lasting', 'j'), before.lasting);
  assert.is((await store.load('brief', 'j'))?.version, 5, 'the shorter kind still loads whole');
});

test('retirement: the shorter kind goes an hour after its end, the other kind stays until the server’s cutoff or for good', async () => {
  const clock = new ManualClock(Date.now() - 2 * HOUR);
  const host = started(clock);
  for (const kind of ['brief', 'lasting']) {
    await host.send(kind, 'r', { type: 'note' });
    await host.send(kind, 'r', { type: 'close' });
  }
  await host.drain();
  const now = Date.now();
  const retirement = new ActorRetirement(db.connection.db);
  for (const days of [30, 0]) {
    const { ended } = retentionCutoffs([brief, lasting], { journalDays: 0, endedDays: days }, now);
    await retirement.sweep(ended!, 10_000);
    assert.equal(await rows('lasting', 'r'), { snapshots: 1, segments: 2 }, `lasting, ${days} days`);
  }
  assert.equal(await rows('brief', 'r'), { snapshots: 0, segments: 0 });
  assert.is(await store.load('brief', 'r'), undefined);
});

test("a kind's retirement pass reads its own ended actors by the kind's index, never the other kinds' ended before them", async () => {
  const q = db.connection.db;
  // Many ended actors of another kind, all ended long before the one kind's: what a database of page loads holds.
  await sql`
    INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers, ended_at)
    SELECT 'sessions', 'k' || g, 1, 1, '{}'::jsonb, '{}'::jsonb, now() - interval '20 days' FROM generate_series(1, 20000) g`.execute(q);
  await sql`
    INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
    SELECT 'sessions', 'k' || g, 1, 1, 1, '[[0, {}]]'::json FROM generate_series(1, 20000) g`.execute(q);
  await sql`ANALYZE actor_snapshots, actor_journal`.execute(q);
  const compiled = retireJournals(new Date(), 500, 'brief').compile(q);
  const plan = await explain(db.connection.pool, compiled.sql, compiled.parameters);
  const nodes = [...planNodes(plan)];
  assert.equal(nodes.filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name']), [], JSON.stringify(plan));
  assert.ok(nodes.some((n) => n['Index Name'] === 'actor_snapshots_ended_by_kind'), JSON.stringify(plan));
});

test.run();
