import type { Kysely, RawBuilder } from 'kysely';

/** What one run of a sweep did: rows removed, and whether it left nothing due behind. */
export interface SweepOutcome {
  readonly removed: number;
  /** False when the run's time budget ran out with rows still due: the next run goes on with them. */
  readonly done: boolean;
}

/** Rows one sweep statement removes at most: a bounded transaction, WAL burst and lock set. */
export const SWEEP_BATCH = 5_000;

/**
 * Repeats `pass` (one statement removing at most `limit` due rows, returning how many it removed) until a pass
 * removes fewer than `limit`, or `budgetMs` has gone by. A single bounded pass per run would remove a fixed number
 * of rows per interval, whatever the rate they fall due at: above it the backlog grows without end.
 */
export async function sweepUntilDone(
  pass: (limit: number) => Promise<number>,
  options: { readonly limit?: number; readonly budgetMs: number },
): Promise<SweepOutcome> {
  const limit = options.limit ?? SWEEP_BATCH;
  const deadline = performance.now() + options.budgetMs;
  let removed = 0;
  for (;;) {
    const count = await pass(limit);
    removed += count;
    if (count < limit) return { removed, done: true };
    if (performance.now() >= deadline) return { removed, done: false };
  }
}

/**
 * Runs each sweep in turn until it is done (`sweepUntilDone`), all of them within one `budgetMs`. In order: a later
 * one may remove what an earlier one's removals released (a grant once its tokens are gone).
 */
export async function sweepInTurn(
  passes: ReadonlyArray<(limit: number) => Promise<number>>,
  options: { readonly budgetMs: number },
): Promise<SweepOutcome> {
  const deadline = performance.now() + options.budgetMs;
  let removed = 0;
  for (const pass of passes) {
    const outcome = await sweepUntilDone(pass, { budgetMs: Math.max(0, deadline - performance.now()) });
    removed += outcome.removed;
    if (!outcome.done) return { removed, done: false };
  }
  return { removed, done: true };
}

/** A sweep pass from a DELETE statement that removes at most `limit` rows: the pass returns how many it removed. */
export function deletingWith<DB>(db: Kysely<DB>) {
  return (statement: (limit: number) => RawBuilder<unknown>) => async (limit: number): Promise<number> =>
    Number((await statement(limit).execute(db)).numAffectedRows ?? 0);
}
