/**
 * The budgets behind an endpoint's `messagesPerMinute`. By default each connection has its own, which is right when a
 * connection is the unit the limit is about. When the limit belongs to someone who may reconnect (a person, a
 * device), a budget per connection starts afresh with every reconnect, and reconnecting buys a new burst: such an
 * endpoint keeps one bucket per someone (`KeyedTokenBuckets`) and hands each of their connections that bucket.
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

  /** Whether the bucket has refilled to its capacity by `now`: it is then the same as a new one. */
  fullAt(now: number): boolean {
    return this.#tokens + Math.max(0, now - this.#last) * this.#perMs >= this.#capacity;
  }

  #refill(now: number): void {
    // A time earlier than the last one (two callers' clocks read out of order) adds nothing, never takes tokens away.
    this.#tokens = Math.min(this.#capacity, this.#tokens + Math.max(0, now - this.#last) * this.#perMs);
    this.#last = Math.max(this.#last, now);
  }
}

/** Buckets kept by default: ≈ 100 bytes each, so about 10 MB at most. */
const DEFAULT_MAX_KEYS = 100_000;

/**
 * One token bucket per key (a person, say), shared by every connection of that key, so the budget carries across
 * reconnects. Memory stays bounded: a bucket that has refilled to capacity is the same as a new one, so it is dropped
 * (at the latest a minute after its key's last message, because a full refill takes a minute); what is kept is the
 * keys that sent something in the last minute, at most `maxKeys` of them. Past `maxKeys` the longest idle key's bucket
 * is dropped before it has refilled, and that key starts afresh: a backstop, reached only when more than `maxKeys`
 * keys all spoke within one minute.
 */
export class KeyedTokenBuckets {
  readonly #perMinute: number;
  readonly #maxKeys: number;
  /** In order of last use, longest idle first (a used key is moved to the end), so the sweep stops at the first live one. */
  readonly #buckets = new Map<string, TokenBucket>();

  constructor(perMinute: number, options: { maxKeys?: number } = {}) {
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isInteger(perMinute) || perMinute <= 0) throw new RangeError('perMinute must be a positive integer');
    if (!Number.isInteger(maxKeys) || maxKeys <= 0) throw new RangeError('maxKeys must be a positive integer');
    this.#perMinute = perMinute;
    this.#maxKeys = maxKeys;
  }

  /** The budget of `key`, for a connection of it: every connection of the key draws from the same bucket. */
  budget(key: string): MessageBudget {
    return { take: (now) => this.take(key, now) };
  }

  take(key: string, now: number): boolean {
    const held = this.#buckets.get(key);
    // Out of the map while the others are swept (so the sweep cannot drop it), then back in at the end: last used.
    if (held) this.#buckets.delete(key);
    this.#forget(now);
    const bucket = held ?? new TokenBucket(this.#perMinute, now);
    this.#buckets.set(key, bucket);
    return bucket.take(now);
  }

  /** Buckets held (keys that sent something within about the last minute). */
  get size(): number {
    return this.#buckets.size;
  }

  /** Drops the full buckets at the front, and the longest idle ones while there is no room for one more. */
  #forget(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (this.#buckets.size < this.#maxKeys && !bucket.fullAt(now)) return;
      this.#buckets.delete(key);
    }
  }
}
