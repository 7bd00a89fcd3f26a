import { sql, type Kysely } from 'kysely';
import type { Database } from '../database.js';
import type { SweepOutcome } from '../sweep.js';

/** Where a retention cycle has got to: the last actor (in key order) of the previous pass. */
export interface JournalCursor {
  readonly kind: string;
  readonly key: string;
}

export interface RetentionPass {
  /** Journal segments removed. */
  readonly removed: number;
  /** Where the next pass starts: after this actor, or at the first one when undefined. */
  readonly next: JournalCursor | undefined;
  /** This pass reached the last actor: a cycle ended, and the next pass starts another. */
  readonly cycleEnded: boolean;
}

/** Per kind, the cutoff (ms) of a kind whose journal goes sooner than the others': later than the sweep's own. */
export type KindCutoffs = Readonly<Record<string, number>>;
const NO_KIND_CUTOFFS: KindCutoffs = Object.freeze({});

/** Segments one retention statement removes at most (and so one pass, before its page of actors counts as done). */
const SEGMENTS_PER_PASS = 5_000;

/**
 * The statement of one retention pass over the page of actors after `cursor`: for each, the oldest segments, up to
 * (not including) the first that is still young, the first the snapshot does not cover, and the newest. Exported for
 * the test that pins what it reads.
 *
 * - A prefix, whatever the clocks wrote: segments keep the time their host's clock gave them, which can step back (a
 *   clock corrected, another node's clock); deleting old segments after a young one would leave holes.
 * - Never the newest segment: the commit fence takes the journal's end from it (COMMIT_BATCH).
 * - Found through the primary key up to that bound (a LATERAL that cannot be flattened into a join over the whole
 *   table), and never more than `limit` versions past the actor's oldest segment: a pass reads what it removes plus
 *   about three rows an actor, and no segment's JSON but those it looks at for the first young one. Once a cycle has
 *   caught up, a pass costs its page of actors, whatever the journal holds.
 */
export function retentionPass(cursor: JournalCursor | undefined, before: number, actors: number, limit: number, kinds: KindCutoffs = NO_KIND_CUTOFFS) {
  // A kind that keeps its journal for less (ActorKind.retention.journalMs) has a later cutoff of its own.
  const cutoff = Object.keys(kinds).length === 0 ? sql`${before}` : sql`COALESCE((${JSON.stringify(kinds)}::jsonb ->> b.kind)::int8, ${before})`;
  const after = cursor ? sql`WHERE (kind, key) > (${cursor.kind}, ${cursor.key})` : sql``;
  return sql<{ planned: string; removed: string; actors: string; last_kind: string | null; last_key: string | null }>`
    WITH page AS MATERIALIZED (
      SELECT kind, key, version FROM actor_snapshots ${after} ORDER BY kind, key LIMIT ${actors}
    ), bounded AS MATERIALIZED (
      -- How far this pass looks into each actor: what its snapshot covers, and at most the pass's limit of versions past
      -- its oldest segment, so an old backlog is read a pass's worth at a time, not whole on every pass.
      SELECT p.kind, p.key, LEAST(p.version + 1,
               (SELECT f.version FROM actor_journal f WHERE f.kind = p.kind AND f.key = p.key ORDER BY f.version LIMIT 1) + ${limit}) AS upto
        FROM page p
    ), doomed AS (
      SELECT d.ctid FROM bounded b CROSS JOIN LATERAL (
        SELECT x.ctid FROM actor_journal x
         WHERE x.kind = b.kind AND x.key = b.key
           AND x.version < LEAST(
             b.upto,
             (SELECT h.version FROM actor_journal h WHERE h.kind = b.kind AND h.key = b.key ORDER BY h.version DESC LIMIT 1),
             (SELECT y.version FROM actor_journal y
               WHERE y.kind = b.kind AND y.key = b.key AND y.version < b.upto AND (y.events->0->>0)::int8 >= ${cutoff}
               ORDER BY y.version LIMIT 1))
         ORDER BY x.version LIMIT ${limit}
      ) d
      LIMIT ${limit}
    ), removed AS (
      DELETE FROM actor_journal WHERE ctid = ANY(ARRAY(SELECT ctid FROM doomed)) RETURNING 1
    ), last AS (
      SELECT kind, key FROM page ORDER BY kind DESC, key DESC LIMIT 1
    )
    SELECT (SELECT count(*) FROM doomed) AS planned, (SELECT count(*) FROM removed) AS removed,
           (SELECT count(*) FROM page) AS actors, (SELECT kind FROM last) AS last_kind, (SELECT key FROM last) AS last_key`;
}

/**
 * Removes journal segments that are both covered by their actor's stored snapshot (loading replays only what follows
 * the snapshot, so nothing needs them) and older than the retention period (inspection reads them until then). The
 * segments after an actor's snapshot stay whatever their age: they are its state.
 *
 * Walks the actors in key order, a page per pass, rather than looking for old segments: the journal has no index on
 * time (one would cost every commit an index insert), and an idle actor's old but kept segments would be found
 * again by every such search; a walk passes each actor once per cycle (see `retentionPass` for what it reads).
 */
export class JournalRetention {
  readonly #db: Kysely<Database>;
  readonly #actorsPerPass: number;
  readonly #segmentsPerPass: number;
  /** Where the current cycle has got to, across sweeps. */
  #cursor: JournalCursor | undefined;

  constructor(db: Kysely<Database>, options: { actorsPerPass?: number; segmentsPerPass?: number } = {}) {
    this.#db = db;
    this.#actorsPerPass = options.actorsPerPass ?? 500;
    this.#segmentsPerPass = options.segmentsPerPass ?? SEGMENTS_PER_PASS;
  }

  /**
   * Passes on from where the last sweep stopped, for at most `budgetMs` (or until `signal` aborts), removing covered
   * segments older than `before` (ms), or than their kind's (later) cutoff in `kinds`. `done`: a cycle over every actor
   * ended in this sweep (the next sweep starts another); not done means only that the cycle goes on, not that rows
   * fall due faster than they go.
   */
  async sweep(before: number, budgetMs: number, signal?: AbortSignal, kinds: KindCutoffs = NO_KIND_CUTOFFS): Promise<SweepOutcome> {
    const deadline = performance.now() + budgetMs;
    let removed = 0;
    do {
      const pass = await this.pass(this.#cursor, before, kinds);
      removed += pass.removed;
      this.#cursor = pass.next;
      if (pass.cycleEnded) return { removed, done: true };
    } while (performance.now() < deadline && !signal?.aborted);
    return { removed, done: false };
  }

  /**
   * One pass over the page of actors after `cursor`. A pass that removed as many segments as it may leaves the cursor
   * where it was (the page may hold more), so no actor is passed over with old segments left.
   */
  async pass(cursor: JournalCursor | undefined, before: number, kinds: KindCutoffs = NO_KIND_CUTOFFS): Promise<RetentionPass> {
    return this.#db.transaction().execute(async (trx) => {
      // The journal's guard lets this transaction, and only for covered segments but the newest, delete (migration 0017).
      await sql`SELECT set_config('registry.journal_retention', 'on', true)`.execute(trx);
      const { rows } = await retentionPass(cursor, before, this.#actorsPerPass, this.#segmentsPerPass, kinds).execute(trx);
      const row = rows[0]!;
      const removed = Number(row.removed);
      // Planned, not removed: another node's pass may have removed some of them first, and the page is unfinished
      // all the same when this pass's plan was cut at the cap.
      if (Number(row.planned) >= this.#segmentsPerPass) return { removed, next: cursor, cycleEnded: false };
      const last = row.last_kind !== null && row.last_key !== null ? { kind: row.last_kind, key: row.last_key } : undefined;
      return Number(row.actors) === this.#actorsPerPass && last ? { removed, next: last, cycleEnded: false } : { removed, next: undefined, cycleEnded: true };
    });
  }
}
