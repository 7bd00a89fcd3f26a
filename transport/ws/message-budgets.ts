import type { RateLimiter } from '../http/rate-limit.js';

/**
 * The budgets behind an endpoint's `messagesPerMinute`. By default each connection has its own, which is right when a
 * connection is the unit the limit is about. When the limit belongs to someone who may reconnect (a person, a
 * device), a budget per connection starts afresh with every reconnect, and reconnecting buys a new burst: such an
 * endpoint hands each of their connections the same keyed budget (`keyedBudget`).
 */

/** Where one connection's inbound messages are counted. */
export interface MessageBudget {
  /** Takes one message from the budget; false when it is spent. `now` is a monotonic time in milliseconds. */
  take(now: number): boolean;
}

/** A burst of up to `perMinute` messages, refilled continuously at `perMinute` per minute. */
export class TokenBucket implements MessageBudget {
  readonly #capacity: number;
  readonly #perMs: number;
  #tokens: number;
  #last: number;

  constructor(perMinute: number, now = performance.now()) {
    this.#capacity = perMinute;
    this.#perMs = perMinute / 60_000;
    this.#tokens = perMinute;
    this.#last = now;
  }

  take(now: number): boolean {
    this.#refill(now);
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }


  #refill(now: number): void {
    // A time earlier than the last one (two callers' clocks read out of order) adds nothing, never takes tokens away.
    this.#tokens = Math.min(this.#capacity, this.#tokens + Math.max(0, now - this.#last) * this.#perMs);
    this.#last = Math.max(this.#last, now);
  }
}

/**
 * The budget of `key` in `limiter`, for a connection of it: every connection handed the budget of one key draws from
 * that key's one bucket (the HTTP gateway's bounded, keyed `RateLimiter`), so a reconnect continues it.
 */
export function keyedBudget(limiter: RateLimiter, key: string, perMinute: number): MessageBudget {
  return { take: () => limiter.take(key, perMinute, perMinute) === 0 };
}
