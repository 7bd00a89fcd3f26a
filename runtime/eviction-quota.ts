import type { Clock } from '../actors/clock.js';
import { HttpError } from '../transport/http/errors.js';

interface Bucket {
  tokens: number;
  at: number;
  /** The session this node last saw holding the person's lease: null none, undefined unknown. */
  holder: string | null | undefined;
}

/**
 * Activations that evict another Runtime, limited per person (the private principal: the account, never the pairwise
 * id an Environment sees, so opening more Environments buys no more evictions). A token bucket: `perMinute` in a
 * burst, refilled at `perMinute` a minute.
 *
 * It is decided from this node's memory alone, before the coordination store (the lease actor) is touched: an
 * eviction storm (two tabs fighting over the lease) costs no coordination writes once over the quota. An activation
 * that would not evict (the lease is free, or the session already holds it) is never refused. Memory is bounded: a
 * full bucket with no known holder carries no information and is dropped.
 */
export class EvictionQuota {
  readonly #clock: Clock;
  readonly #perMinute: number;
  readonly #buckets = new Map<string, Bucket>();

  constructor(clock: Clock, perMinute: number) {
    this.#clock = clock;
    this.#perMinute = perMinute;
  }

  /** Throws 429 when `sessionId` activating now could evict and the person has no evictions left this minute. */
  admit(accountId: string, sessionId: string): void {
    const bucket = this.#bucket(accountId);
    if (!bucket || bucket.tokens >= 1) return;
    if (bucket.holder === null || bucket.holder === sessionId) return;
    const retryAfterS = Math.max(1, Math.ceil(((1 - bucket.tokens) * 60) / this.#perMinute));
    throw new HttpError(
      429,
      'runtime_eviction_quota_exceeded',
      `this person's Runtimes took the lease from each other more than ${this.#perMinute} times in a minute; retry in ${retryAfterS} s`,
      { family: 'runtime', headers: { 'retry-after': String(retryAfterS) } },
    );
  }

  /** The outcome of an activation or a lease ending, as the lease actor decided it. */
  record(accountId: string, holder: string | null, evicted: boolean): void {
    const bucket = this.#bucket(accountId) ?? { tokens: this.#perMinute, at: this.#clock.now(), holder: undefined };
    bucket.holder = holder;
    if (evicted) bucket.tokens -= 1;
    if (bucket.tokens >= this.#perMinute && holder === null) this.#buckets.delete(accountId);
    else this.#buckets.set(accountId, bucket);
  }

  #bucket(accountId: string): Bucket | undefined {
    const bucket = this.#buckets.get(accountId);
    if (!bucket) return undefined;
    const now = this.#clock.now();
    bucket.tokens = Math.min(this.#perMinute, bucket.tokens + ((now - bucket.at) * this.#perMinute) / 60_000);
    bucket.at = now;
    return bucket;
  }
}
