/**
 * Actors whose stored state does not restore (kind code throws on it, or the journal has a gap), and when the timer
 * poller may load each again: a due timer would otherwise reload such an actor, and log its failure, on every poll for
 * ever. The wait doubles from `firstMs` to `maxMs` and is forgotten once the actor restores. Failures are logged the
 * first time, then at most once per `logEveryMs` with their count.
 *
 * Bounded: past `limit` actors, the one whose latest failure is oldest is forgotten (it is tried at the next poll and
 * comes back), so a flood of broken actors costs at most `limit` entries.
 */
export interface RestoreBackoffOptions {
  readonly firstMs: number;
  readonly maxMs: number;
  readonly limit: number;
  readonly logEveryMs: number;
}

export const defaultRestoreBackoff: RestoreBackoffOptions = Object.freeze({
  firstMs: 5_000,
  maxMs: 10 * 60_000,
  limit: 10_000,
  logEveryMs: 60 * 60_000,
});

/** What the caller should do about one failure. */
export interface RestoreFailure {
  /** Failures in a row, this one included. */
  readonly failures: number;
  /** When the poller may load the actor again (ms). */
  readonly retryAt: number;
  /** Whether to log this failure: the first, then one per `logEveryMs`. */
  readonly log: boolean;
}

interface Entry {
  failures: number;
  retryAt: number;
  loggedAt: number;
}

export class RestoreBackoff {
  readonly #options: RestoreBackoffOptions;
  /** By actor id, in order of latest failure (an entry is moved to the end when it fails again). */
  readonly #entries = new Map<string, Entry>();

  constructor(options: RestoreBackoffOptions = defaultRestoreBackoff) {
    this.#options = options;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Records a failure to restore `id` at `now`. */
  failed(id: string, now: number): RestoreFailure {
    const entry = this.#entries.get(id);
    if (entry) this.#entries.delete(id);
    else if (this.#entries.size >= this.#options.limit) this.#entries.delete(this.#entries.keys().next().value!);
    const failures = (entry?.failures ?? 0) + 1;
    const wait = Math.min(this.#options.maxMs, this.#options.firstMs * 2 ** Math.min(failures - 1, 30));
    const log = entry === undefined || now - entry.loggedAt >= this.#options.logEveryMs;
    this.#entries.set(id, { failures, retryAt: now + wait, loggedAt: log ? now : entry!.loggedAt });
    return { failures, retryAt: now + wait, log };
  }

  /** Whether the poller should leave `id` alone at `now`. */
  waiting(id: string, now: number): boolean {
    const entry = this.#entries.get(id);
    return entry !== undefined && now < entry.retryAt;
  }

  /** `id` restored: its next failure is a first one again. */
  restored(id: string): void {
    if (this.#entries.size > 0) this.#entries.delete(id);
  }
}
