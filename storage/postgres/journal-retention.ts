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
  /** Where the next pass goes on; undefined when this pass reached the last actor (the next one starts over). */
  readonly next: JournalCursor | undefined;
}

/**
 * Removes journal segments that are both covered by their actor's stored snapshot (loading replays only what follows
 * the snapshot, so nothing needs them) and older than the retention period (inspection reads them until then). The
 * segments after an actor's snapshot stay whatever their age: they are its state.
 *
 * Walks the actors in key order, a page per pass, rather than looking for old segments: the journal has no index on
 * time (one would cost every commit an index insert), and an idle actor's uncovered tail, old but kept, would be
 * found again by every such search; a walk passes it once per cycle. Each actor's segments are found through the
 * journal's primary key and deleted by row address, so a pass costs its page of actors, whatever the table's size.
 */
export class JournalRetention {
  readonly #db: Kysely<Database>;
  readonly #actorsPerPass: number;
  /** Where the current cycle has got to, across sweeps. */
  #cursor: JournalCursor | undefined;

  constructor(db: Kysely<Database>, options: { actorsPerPass?: number } = {}) {
    this.#db = db;
    this.#actorsPerPass = options.actorsPerPass ?? 500;
  }

  /**
   * Passes on from where the last sweep stopped, for at most `budgetMs`, removing covered segments whose first event
   * is before `before` (ms). `done`: a cycle over every actor ended in this sweep (the next one starts another).
   */
  async sweep(before: number, budgetMs: number): Promise<SweepOutcome> {
    const deadline = performance.now() + budgetMs;
    let removed = 0;
    do {
      const pass = await this.pass(this.#cursor, before);
      removed += pass.removed;
      this.#cursor = pass.next;
      if (pass.next === undefined) return { removed, done: true };
    } while (performance.now() < deadline);
    return { removed, done: false };
  }

  /** One pass over the page of actors after `cursor`: their covered segments whose first event is before `before` (ms) go. */
  async pass(cursor: JournalCursor | undefined, before: number): Promise<RetentionPass> {
    const after = cursor ? sql`WHERE (kind, key) > (${cursor.kind}, ${cursor.key})` : sql``;
    return this.#db.transaction().execute(async (trx) => {
      // The journal's guard lets this transaction, and only for covered segments, delete (migration 0017).
      await sql`SELECT set_config('registry.journal_retention', 'on', true)`.execute(trx);
      const { rows } = await sql<{ removed: string; actors: string; last_kind: string | null; last_key: string | null }>`
        WITH page AS MATERIALIZED (
          SELECT kind, key, version FROM actor_snapshots ${after} ORDER BY kind, key LIMIT ${this.#actorsPerPass}
        ), removed AS (
          DELETE FROM actor_journal WHERE ctid = ANY(ARRAY(
            SELECT j.ctid FROM page p
              JOIN LATERAL (
                SELECT x.ctid FROM actor_journal x
                 WHERE x.kind = p.kind AND x.key = p.key AND x.last_version <= p.version
                   AND (x.events->0->>0)::int8 < ${before}
              ) j ON true))
          RETURNING 1
        ), last AS (
          SELECT kind, key FROM page ORDER BY kind DESC, key DESC LIMIT 1
        )
        SELECT (SELECT count(*) FROM removed) AS removed, (SELECT count(*) FROM page) AS actors,
               (SELECT kind FROM last) AS last_kind, (SELECT key FROM last) AS last_key`.execute(trx);
      const row = rows[0]!;
      const full = Number(row.actors) === this.#actorsPerPass;
      return {
        removed: Number(row.removed),
        next: full && row.last_kind !== null && row.last_key !== null ? { kind: row.last_kind, key: row.last_key } : undefined,
      };
    });
  }
}
