import type { Clock } from '../../actors/clock.js';

/**
 * Token buckets, one per key: `perMinute` requests per minute sustained, bursts of up to `burst`. In-process (a
 * node's own share of the traffic); bounded, so a flood of distinct keys cannot grow memory without end: when full,
 * the stalest buckets go first (a forgotten bucket is a full one, which only ever errs towards allowing).
 */
export class RateLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #clock: Clock;
  readonly #limit: number;

  constructor(clock: Clock, limit = 100_000) {
    this.#clock = clock;
    this.#limit = limit;
  }

  /** Takes one token; returns 0 when allowed, else the seconds until one is available. */
  take(key: string, perMinute: number, burst: number): number {
    const now = this.#clock.now();
    const ratePerMs = perMinute / 60_000;
    const bucket = this.#buckets.get(key);
    let tokens = burst;
    if (bucket) {
      tokens = Math.min(burst, bucket.tokens + (now - bucket.at) * ratePerMs);
      this.#buckets.delete(key); // re-inserted below: the map stays ordered by last use
    } else if (this.#buckets.size >= this.#limit) {
      this.#buckets.delete(this.#buckets.keys().next().value!);
    }
    if (tokens < 1) {
      this.#buckets.set(key, { tokens, at: now });
      return Math.ceil((1 - tokens) / ratePerMs / 1000);
    }
    this.#buckets.set(key, { tokens: tokens - 1, at: now });
    return 0;
  }
}
