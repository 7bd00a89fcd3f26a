import type pg from 'pg';
import { MachineCpu } from './cpu.js';

/**
 * The raw limit: what Postgres absorbs when the same snapshot rows are written straight through pg, with none of the
 * host's work (no machine, no journal, no fence, no reply bookkeeping). One multi-row upsert per statement, the rows
 * travelling as one jsonb array like the host's commit does, as a named statement like the host's.
 */
const RAW_UPSERT = `
INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers, next_due_at)
SELECT kind, key, version, epoch, snapshot, timers, next_due_at
  FROM jsonb_to_recordset($1::jsonb) AS t(
    kind text, key text, version int8, epoch int8, snapshot jsonb, timers jsonb, next_due_at timestamptz)
ON CONFLICT (kind, key) DO UPDATE
   SET version = EXCLUDED.version, epoch = EXCLUDED.epoch, snapshot = EXCLUDED.snapshot, timers = EXCLUDED.timers,
       next_due_at = EXCLUDED.next_due_at, updated_at = now()`;

export interface RawTarget {
  readonly pool: pg.Pool;
  readonly kind: string;
  readonly keys: readonly string[];
  /** The snapshot row an actor holds after `events` events, shaped exactly as the host persists it. */
  readonly snapshotAt: (events: number) => unknown;
  /** Epoch written with every row (an activation that loads the row later claims a newer one). */
  readonly epoch: number;
}

export interface RawRun {
  readonly concurrency: number;
  readonly batchRows: number;
  /** Rows credited to the window (each statement by the share of its duration inside it) ÷ the window. */
  readonly rowsPerSec: number;
  /** Statements that overlapped the window, and their mean duration. */
  readonly statements: number;
  readonly meanStatementMs: number;
  /** Share of all cores busy during the window (every process: Postgres and this one). */
  readonly machineCpu: number | undefined;
}

/** Writes one target's rows; per-key version counters make each upsert move its row forward like an event would. */
export class RawUpserter {
  readonly #target: RawTarget;
  readonly #versions: number[];

  constructor(target: RawTarget) {
    this.#target = target;
    this.#versions = target.keys.map(() => 0);
  }

  /** Writes every row once, untimed: creates the rows that do not exist yet. */
  async seed(batchRows: number): Promise<void> {
    const all = this.#target.keys.map((_, i) => i);
    for (let start = 0; start < all.length; start += batchRows) await this.#write(all.slice(start, start + batchRows));
  }

  /**
   * `concurrency` loops issue upserts back to back for `durationMs` (after `warmupMs` unmeasured); each loop owns a
   * disjoint share of the keys, as each host commit lane does, and each statement writes `batchRows` distinct rows
   * picked uniformly at random from that share, as the host's batches hold whichever actors random senders hit (in
   * key order, a batch would touch adjacent index and heap pages, a cheaper pattern than the host's).
   */
  async run(options: { concurrency: number; batchRows: number; durationMs: number; warmupMs: number }): Promise<RawRun> {
    const { concurrency } = options;
    const shares: number[][] = Array.from({ length: concurrency }, () => []);
    this.#target.keys.forEach((_, i) => shares[i % concurrency]!.push(i));
    const batchRows = Math.max(1, Math.min(options.batchRows, ...shares.map((s) => s.length)));
    // Each statement is credited with the share of its rows that matches the share of its duration inside the window
    // (a statement straddling an edge counts in part), so the rate is not rounded to whole statements: with large
    // batches one statement can be a twentieth of a window's rows.
    let rows = 0;
    let statements = 0;
    let statementMs = 0;
    const from = performance.now() + options.warmupMs;
    const to = from + options.durationMs;
    let machine: MachineCpu | undefined;
    let machineCpu: number | undefined;
    const startTimer = setTimeout(() => (machine = MachineCpu.start()), options.warmupMs);
    const endTimer = setTimeout(() => (machineCpu = machine?.share()), options.warmupMs + options.durationMs);
    const loop = async (share: number[]): Promise<void> => {
      const pool = [...share];
      while (performance.now() < to) {
        // A partial Fisher–Yates shuffle: the first batchRows of the pool are a uniformly random subset of the share.
        for (let n = 0; n < batchRows; n++) {
          const pick = n + Math.floor(Math.random() * (pool.length - n));
          [pool[n], pool[pick]] = [pool[pick]!, pool[n]!];
        }
        const batch = pool.slice(0, batchRows);
        const started = performance.now();
        await this.#write(batch);
        const finished = performance.now();
        const inside = Math.min(finished, to) - Math.max(started, from);
        if (inside > 0) {
          rows += (batch.length * inside) / Math.max(finished - started, 1e-6);
          statements++;
          statementMs += finished - started;
        }
      }
    };
    await Promise.all(shares.map(loop));
    clearTimeout(startTimer);
    clearTimeout(endTimer);
    // The end timer may lose the race with the loops' own end of window.
    machineCpu ??= machine?.share();
    const seconds = options.durationMs / 1000;
    return {
      concurrency,
      batchRows,
      rowsPerSec: seconds > 0 ? rows / seconds : 0,
      statements,
      meanStatementMs: statements > 0 ? statementMs / statements : NaN,
      machineCpu,
    };
  }

  async #write(indexes: readonly number[]): Promise<void> {
    const { kind, keys, snapshotAt, epoch } = this.#target;
    const rows = indexes.map((i) => {
      const version = ++this.#versions[i]!;
      return { kind, key: keys[i]!, version, epoch, snapshot: snapshotAt(version), timers: {}, next_due_at: null };
    });
    await this.#target.pool.query({ name: 'bench_raw_upsert', text: RAW_UPSERT, values: [JSON.stringify(rows)] });
  }
}
