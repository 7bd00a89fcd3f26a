import { sql, type Kysely } from 'kysely';
import type { Database } from '../database.js';
import { sweepInTurn, type SweepOutcome } from '../sweep.js';

/**
 * Ended actors one retirement pass removes at most. Counted in actors, not rows: an actor takes all of its journal
 * with it, a handful of segments once journal retention has passed it, its whole history when that is off.
 */
const ACTORS_PER_PASS = 500;

/** What one retirement sweep removes: actors of every kind ended before `before`, and of some kinds earlier ones. */
export interface RetirementCutoffs {
  /** Every kind's cutoff (ms); none when the server keeps ended actors (ACTOR_ENDED_RETENTION_DAYS=0). */
  readonly before?: number;
  /** Kinds that keep theirs for less (ActorKind.retention.endedMs), each with its own cutoff (ms). */
  readonly kinds?: ReadonlyArray<{ readonly kind: string; readonly before: number }>;
}

/**
 * The first statement of a pass: locks up to `limit` actors that ended before `before` (oldest end first, found by the
 * partial indexes of migrations 0019 and, for one `kind`, 0021) and removes their journal, returning the actors. SKIP
 * LOCKED: two nodes sweeping at once take different actors instead of queueing behind each other. Exported for the
 * test that pins its plan.
 */
export function retireJournals(before: Date, limit: number, kind?: string) {
  const ofKind = kind === undefined ? sql`` : sql`AND kind = ${kind}`;
  return sql<{ kind: string; key: string }>`
    WITH due AS MATERIALIZED (
      SELECT kind, key FROM actor_snapshots WHERE ended_at < ${before} ${ofKind} ORDER BY ended_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ), journal AS (
      DELETE FROM actor_journal j USING due WHERE j.kind = due.kind AND j.key = due.key
    )
    SELECT kind, key FROM due`;
}

/**
 * Removes actors that ended (their kind's `endedAt`, stored with the snapshot by the commit that ended them) more than
 * a retention period ago: journal and snapshot row, so their storage does not grow with every Runtime session ever
 * opened. A retired actor loads as never written (a session read answers 404), and the operator's inspection no longer
 * finds it.
 *
 * Safe against a node that still holds the actor in memory: a write after the retirement meets a journal that ends at
 * 0, not at the activation's version, and the fence refuses it (the activation stops; the next use starts afresh). A
 * write during it stores its snapshot (the host does so for every write of an ended actor), so it waits on the row
 * this pass locked and then inserts the row anew: the actor lives on from that write, with no segment left behind.
 *
 * Journal first, then the snapshot rows, in one transaction: the journal's guard (migration 0019) allows these deletes
 * only for actors whose snapshot row records an end, and checks that row itself.
 */
export class ActorRetirement {
  readonly #db: Kysely<Database>;
  readonly #actorsPerPass: number;

  constructor(db: Kysely<Database>, options: { actorsPerPass?: number } = {}) {
    this.#db = db;
    this.#actorsPerPass = options.actorsPerPass ?? ACTORS_PER_PASS;
  }

  /**
   * Retires actors that ended before their cutoff (`before` ms, or per kind: RetirementCutoffs), pass after pass for
   * at most `budgetMs` or until `signal` aborts.
   */
  sweep(cutoffs: number | RetirementCutoffs, budgetMs: number, signal?: AbortSignal): Promise<SweepOutcome> {
    const { before, kinds = [] } = typeof cutoffs === 'number' ? { before: cutoffs } : cutoffs;
    const passes = [
      ...(before === undefined ? [] : [(limit: number) => this.pass(before, limit)]),
      ...kinds.map(({ kind, before: kindBefore }) => (limit: number) => this.pass(kindBefore, limit, kind)),
    ];
    return sweepInTurn(passes, { limit: this.#actorsPerPass, budgetMs, ...(signal ? { signal } : {}) });
  }

  /** One pass: at most `limit` actors (of `kind`, or any) that ended before `before` (ms). Answers how many were retired. */
  async pass(before: number, limit = this.#actorsPerPass, kind?: string): Promise<number> {
    return this.#db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('registry.actor_retirement', 'on', true)`.execute(trx);
      const { rows } = await retireJournals(new Date(before), limit, kind).execute(trx);
      if (rows.length === 0) return 0;
      // The rows are locked by this transaction since the first statement: nothing has changed them since.
      const removed = await sql`
        DELETE FROM actor_snapshots s
         USING json_to_recordset(${JSON.stringify(rows)}::json) AS r(kind text, key text)
         WHERE s.kind = r.kind AND s.key = r.key`.execute(trx);
      return Number(removed.numAffectedRows ?? 0);
    });
  }
}
