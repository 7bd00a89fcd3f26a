/**
 * The budgets behind an endpoint's `messagesPerMinute`. By default each connection has its own, which is right when a
 * connection is the unit the limit is about. When the limit belongs to someone who may reconnect (a person, a
 * device), a budget per connection starts afresh with every reconnect, and reconnecting buys a new burst: such an
 * endpoint hands each of their connections the same keyed budget (`KeyedBudgets`).
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
 * Budgets that outlive their connections, one per key (a person, a page): a connection of a key is handed the key's
 * one bucket when it opens and draws from it directly, so a reconnect continues the budget and a message costs no
 * more than with a bucket of its own (no lookup per message: runtime sockets carry tens of thousands a second).
 * Bounded: at most `maxKeys` buckets; the key handed out least recently is forgotten first and starts afresh (erring
 * towards allowing), while a connection still holding its bucket keeps drawing from it.
 */
export class KeyedBudgets {
  readonly #buckets = new Map<string, TokenBucket>();
  readonly #perMinute: number;
  readonly #maxKeys: number;

  constructor(perMinute: number, options: { maxKeys?: number } = {}) {
    this.#perMinute = perMinute;
    this.#maxKeys = options.maxKeys ?? 100_000;
  }

  /** The budget of `key`, for a connection of it; `now` is a monotonic time in milliseconds, as `take` is given. */
  budgetOf(key: string, now = performance.now()): MessageBudget {
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      if (this.#buckets.size >= this.#maxKeys) this.#buckets.delete(this.#buckets.keys().next().value!);
      bucket = new TokenBucket(this.#perMinute, now);
    } else {
      this.#buckets.delete(key); // re-inserted below: the map stays ordered by last handout
    }
    this.#buckets.set(key, bucket);
    return bucket;
  }
}
