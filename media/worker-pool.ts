import { availableParallelism } from 'node:os';
import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import type { Logger } from 'pino';
import { PooledWorker, type WorkerLoad } from './pooled-worker.js';
import { resolveWorkerBinary } from './worker-binary.js';

export type { WorkerLoad } from './pooled-worker.js';

export interface MediaWorkerPoolOptions {
  /** Workers to run; one per core by default (a mediasoup worker is single-threaded). */
  readonly size?: number;
  readonly logLevel?: types.WorkerLogLevel;
  readonly rtcMinPort?: number;
  readonly rtcMaxPort?: number;
  readonly logger: Logger;
  /** The mediasoup-worker binary; `resolveWorkerBinary()` by default. */
  readonly workerBin?: string;
}

/** Told once a dead worker's replacement is up (or could not be started), so rooms rebuild on live workers. */
export interface WorkerLost {
  readonly type: 'worker.lost';
  readonly pid: number;
  readonly error: Error;
  /** Rooms that had a router on the dead worker: their media there is gone. */
  readonly rooms: readonly string[];
  /**
   * The new worker's pid; undefined when it could not be started: the pool runs one short while it starts one again,
   * after REPLACEMENT_RETRY_FIRST_MS and then twice as long each time up to REPLACEMENT_RETRY_MAX_MS, until it is up.
   */
  readonly replacementPid: number | undefined;
}

/** First wait before starting again a replacement that did not start (a spawn can fail for a moment: EAGAIN, ENOMEM). */
export const REPLACEMENT_RETRY_FIRST_MS = 250;
/** Longest wait between two starts of a replacement. */
export const REPLACEMENT_RETRY_MAX_MS = 10_000;

export type WorkerLostListener = (event: WorkerLost) => void;

export class MediaPoolClosedError extends Error {
  readonly code = 'media_pool_closed';
  override readonly name = 'MediaPoolClosedError';
}

/**
 * Whether `error` is a worker's loss rather than a fault of the call: mediasoup's WorkerClosedError (the channel
 * closed under the request as the worker died, or was closed when it was sent), or no live worker to take it while a
 * dead one's replacement starts again (an open pool of none).
 */
export function isWorkerLoss(error: unknown, pool?: MediaWorkerPool): boolean {
  return error instanceof mediasoup.errors.WorkerClosedError || (error instanceof MediaPoolClosedError && pool !== undefined && !pool.closed);
}

/**
 * This node's mediasoup workers. Rooms take routers from the least-loaded worker (see `PooledWorker` for the load
 * measure); a worker that dies is replaced by a fresh one and `onWorkerLost` listeners learn which rooms lost media.
 */
export class MediaWorkerPool {
  readonly #workers: PooledWorker[];
  readonly #settings: types.WorkerSettings;
  readonly #logger: Logger;
  readonly #listeners = new Set<WorkerLostListener>();
  /** Replacements waiting to be started again. */
  readonly #retries = new Set<NodeJS.Timeout>();
  #closed = false;

  private constructor(settings: types.WorkerSettings, logger: Logger) {
    this.#workers = [];
    this.#settings = settings;
    this.#logger = logger;
  }

  static async create(options: MediaWorkerPoolOptions): Promise<MediaWorkerPool> {
    const size = options.size ?? availableParallelism();
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`pool size must be a positive integer, got ${size}`);
    const settings: types.WorkerSettings = Object.freeze({
      workerBin: options.workerBin ?? resolveWorkerBinary().path,
      logLevel: options.logLevel ?? 'warn',
      ...(options.rtcMinPort === undefined ? {} : { rtcMinPort: options.rtcMinPort }),
      ...(options.rtcMaxPort === undefined ? {} : { rtcMaxPort: options.rtcMaxPort }),
    });
    const pool = new MediaWorkerPool(settings, options.logger);
    try {
      const workers = await Promise.all(Array.from({ length: size }, () => mediasoup.createWorker(settings)));
      for (const worker of workers) pool.#adopt(worker);
    } catch (error) {
      pool.close();
      throw error;
    }
    return pool;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Live workers. */
  get size(): number {
    return this.#workers.length;
  }

  workers(): readonly WorkerLoad[] {
    return this.#workers.map((w) => w.snapshot());
  }

  /**
   * The live worker with the least load, preferring those whose pid is not in `avoid` (a room spreading onto another
   * worker); ties go to the one with fewer routers, then to the older.
   */
  leastLoaded(avoid: ReadonlySet<number> = new Set()): PooledWorker {
    if (this.#closed) throw new MediaPoolClosedError('the media worker pool is closed');
    const preferred = this.#workers.filter((w) => !avoid.has(w.pid));
    const candidates = preferred.length > 0 ? preferred : this.#workers;
    let best: PooledWorker | undefined;
    for (const w of candidates) {
      if (!best || w.load < best.load || (w.load === best.load && w.routerCount < best.routerCount)) best = w;
    }
    if (!best) throw new MediaPoolClosedError('no live media worker');
    return best;
  }

  /** A router for `roomId` on the least-loaded worker (see `leastLoaded`). */
  async createRouter(roomId: string, options: types.RouterOptions, avoid?: ReadonlySet<number>): Promise<types.Router> {
    return this.leastLoaded(avoid).createRouter(roomId, options);
  }

  /** Each live worker's CPU and memory as its process reports them (getrusage: times in ms). */
  async resourceUsage(): Promise<readonly { readonly pid: number; readonly usage: types.WorkerResourceUsage }[]> {
    return Promise.all(this.#workers.map(async (w) => ({ pid: w.pid, usage: await w.worker.getResourceUsage() })));
  }

  /** Returns the unsubscribe function. */
  onWorkerLost(listener: WorkerLostListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Closes every worker (and so every router on them). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const timer of this.#retries) clearTimeout(timer);
    this.#retries.clear();
    for (const w of this.#workers.splice(0)) w.worker.close();
    this.#listeners.clear();
  }

  #adopt(worker: types.Worker): void {
    const pooled = new PooledWorker(worker);
    this.#workers.push(pooled);
    worker.once('died', (error) => {
      const index = this.#workers.indexOf(pooled);
      if (index >= 0) this.#workers.splice(index, 1);
      // A replacement that starts after close() is closed at once (see #replace).
      void this.#replace(pooled, error);
    });
  }

  async #replace(dead: PooledWorker, error: Error): Promise<void> {
    const rooms = dead.rooms;
    this.#logger.error({ err: error, pid: dead.pid, rooms: rooms.length }, 'mediasoup worker died; starting a replacement');
    if (this.#closed) return;
    const replacementPid = await this.#startReplacement(dead.pid);
    if (this.#closed) return;
    if (replacementPid === undefined) this.#retryReplacement(dead.pid, REPLACEMENT_RETRY_FIRST_MS);
    const event: WorkerLost = Object.freeze({ type: 'worker.lost', pid: dead.pid, error, rooms, replacementPid });
    for (const listener of [...this.#listeners]) {
      try {
        listener(event);
      } catch (listenerError) {
        this.#logger.error({ err: listenerError }, 'worker-lost listener threw');
      }
    }
  }

  /** A new worker in the pool: its pid, or undefined when it did not start (or the pool closed meanwhile). */
  async #startReplacement(replaced: number): Promise<number | undefined> {
    try {
      const worker = await mediasoup.createWorker(this.#settings);
      if (this.#closed) {
        worker.close();
        return undefined;
      }
      this.#adopt(worker);
      this.#logger.info({ pid: worker.pid, replaced }, 'mediasoup worker replaced');
      return worker.pid;
    } catch (startError) {
      this.#logger.error({ err: startError, replaced }, 'replacement mediasoup worker did not start');
      return undefined;
    }
  }

  /**
   * Starts the replacement again after `delayMs`, and again, backing off, until it is up: a pool left one short for good
   * by one failed spawn would, at one worker, leave this node without media (every room `media_unavailable`) until a
   * restart. Rooms waiting for a live worker retry on their own (RoomMedia).
   */
  #retryReplacement(replaced: number, delayMs: number): void {
    const timer = setTimeout(() => {
      this.#retries.delete(timer);
      if (this.#closed) return;
      void this.#startReplacement(replaced).then((pid) => {
        if (pid === undefined && !this.#closed) this.#retryReplacement(replaced, Math.min(delayMs * 2, REPLACEMENT_RETRY_MAX_MS));
      });
    }, delayMs);
    // Not what keeps a process alive: close() clears it.
    timer.unref();
    this.#retries.add(timer);
  }
}
