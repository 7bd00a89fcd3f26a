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
 * Sweeps tables within one `budgetMs`, a pass of each in turn (one statement removing at most `limit` due rows and
 * returning how many it removed), round after round, until each has a pass that removed fewer than `limit` rows, or
 * `signal` aborts (checked between statements). Round after round: a single bounded pass per run would remove a fixed
 * number of rows per interval, whatever the rate they fall due at, and above it the backlog would grow without end.
 * In turns rather than one table after the other: a table whose rows fall due faster than they go must not starve
 * the others. Within a round the passes run in the order given, so a later one may remove what an earlier one's
 * removals released (a grant once its tokens are gone).
 */
export async function sweepInTurn(
  passes: ReadonlyArray<(limit: number) => Promise<number>>,
  options: { readonly limit?: number; readonly budgetMs: number; readonly signal?: AbortSignal },
): Promise<SweepOutcome> {
  const limit = options.limit ?? SWEEP_BATCH;
  const deadline = performance.now() + options.budgetMs;
  let pending = [...passes];
  let removed = 0;
  for (;;) {
    const unfinished: typeof pending = [];
    for (const pass of pending) {
      if (options.signal?.aborted) return { removed, done: false };
      const count = await pass(limit);
      removed += count;
      if (count >= limit) unfinished.push(pass);
    }
    pending = unfinished;
    if (pending.length === 0) return { removed, done: true };
    if (performance.now() >= deadline) return { removed, done: false };
  }
}

/** A sweep statement: a DELETE of at most `limit` due rows, named by the table it removes from. */
export type SweepStatement = readonly [table: string, statement: (limit: number) => RawBuilder<unknown>];

/** Runs `statements` in turn (`sweepInTurn`), each pass one execution of a statement, which removes at most `limit` rows. */
export function sweepStatements<DB>(
  db: Kysely<DB>,
  statements: readonly SweepStatement[],
  options: { readonly budgetMs: number; readonly signal?: AbortSignal | undefined },
): Promise<SweepOutcome> {
  const passes = statements.map(([, statement]) => async (limit: number): Promise<number> =>
    Number((await statement(limit).execute(db)).numAffectedRows ?? 0));
  return sweepInTurn(passes, { budgetMs: options.budgetMs, ...(options.signal ? { signal: options.signal } : {}) });
}

export interface ScheduledSweep {
  /** No further run starts; resolves once the run in flight (if any) has finished. */
  stop(): Promise<void>;
}

/** Told how each run of a scheduled sweep ended (the server's metrics). */
export interface SweepObserver {
  /** The sweep will run: its failures are counted from 0 (a series that first appears at 1 shows no increase), its last success is 0. */
  scheduled?(sweep: string): void;
  /** `continuing`: a sweep whose runs normally end unfinished (a cycle over every actor) goes on next run. */
  runEnded(sweep: string, outcome: 'done' | 'unfinished' | 'continuing' | 'failed', removed: number): void;
}

/** What a scheduled sweep logs with (pino's shape). */
export interface SweepLogger {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
}

/**
 * Runs `sweep` every `intervalMs`, one run at a time (a slow run delays the next instead of overlapping it), and
 * `restMs` after a run that finished everything, when that is longer. Logs what each run removed, failures (the next
 * run tries again) and, unless `unfinishedIsNormal`, a warning when a run ended with rows still due: they fall due
 * faster than the sweep removes them. Stopping aborts the run in flight between its statements and waits for it, so
 * a sweep never meets a closed pool and never holds up a shutdown for its whole budget.
 */
export function scheduleSweep(
  name: string,
  sweep: (signal: AbortSignal) => Promise<SweepOutcome>,
  options: {
    readonly intervalMs: number;
    /** Delay of the first run (default `intervalMs`): a server restarted more often than a long interval still sweeps. */
    readonly firstRunMs?: number;
    readonly restMs?: number;
    readonly unfinishedIsNormal?: boolean;
    readonly logger: SweepLogger;
    readonly observer?: SweepObserver;
  },
): ScheduledSweep {
  const { logger, observer } = options;
  observer?.scheduled?.(name);
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;
  const next = (delay: number): void => {
    if (!stopping.signal.aborted) timer = setTimeout(run, delay).unref();
  };
  const run = (): void => {
    // Through a resolved promise: a sweep that throws instead of rejecting is a failed run too, not a crash.
    inFlight = Promise.resolve(stopping.signal).then(sweep).then(
      ({ removed, done }) => {
        observer?.runEnded(name, done ? 'done' : options.unfinishedIsNormal ? 'continuing' : 'unfinished', removed);
        if (!done && !options.unfinishedIsNormal && !stopping.signal.aborted) {
          logger.warn({ sweep: name, removed }, 'rows fall due faster than this sweep removes them; the rest go next run');
        } else if (removed > 0) logger.info({ sweep: name, removed }, 'sweep removed rows past their retention');
        next(done && options.restMs !== undefined ? Math.max(options.restMs, options.intervalMs) : options.intervalMs);
      },
      (err: unknown) => {
        observer?.runEnded(name, 'failed', 0);
        logger.warn({ sweep: name, err }, 'sweep failed; the next run tries again');
        next(options.intervalMs);
      },
    );
  };
  next(options.firstRunMs ?? options.intervalMs);
  return {
    stop: async () => {
      stopping.abort();
      clearTimeout(timer);
      await inFlight;
    },
  };
}
