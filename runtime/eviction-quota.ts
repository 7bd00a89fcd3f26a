import type { Clock, TimerHandle } from '../actors/clock.js';
import { HttpError } from '../transport/http/errors.js';

interface Bucket {
  tokens: number;
  at: number;
  /** The session this node last saw holding the person's lease: null none, undefined unknown. */
  holder: string | null | undefined;
  /** Activations of this person admitted and not yet settled. */
  inFlight: number;
  /** Set while the bucket is kept only for the tokens it is refilling: it is looked at again once they are back. */
  refilled?: TimerHandle;
}

/** One admitted activation: settle it with the lease actor's decision, or cancel it when it never got one. */
export interface EvictionTicket {
  settle(holder: string, evicted: boolean): void;
  cancel(): void;
}

/**
 * Activations that evict another Runtime, limited per person (the private principal: the account, never the pairwise
 * id an Environment sees, so opening more Environments buys no more evictions). A token bucket: `perMinute` in a
 * burst, refilled at `perMinute` a minute.
 *
 * It is decided from this node's memory alone, before the coordination store (the session and lease actors) is
 * touched: an eviction storm (two tabs fighting over the lease) costs no coordination reads or writes once over the
 * quota. Whether an activation evicts is known only once the lease actor decided, so an activation that could evict
 * reserves a token when admitted and gets it back if it evicted nobody; activations arriving together therefore
 * cannot all pass on the same last token. Only an activation that certainly evicts nobody (the lease is free or held
 * by this very session, and no other activation of the person is under way) passes without a token. Memory is
 * bounded: a full bucket with no known holder (the lease free, or never learnt) and nothing in flight carries no
 * information and is dropped, at once or, when tokens were still refilling, once they are back.
 */
export class EvictionQuota {
  readonly #clock: Clock;
  readonly #perMinute: number;
  readonly #buckets = new Map<string, Bucket>();

  constructor(clock: Clock, perMinute: number) {
    this.#clock = clock;
    this.#perMinute = perMinute;
  }

  /** Admits `sessionId` activating now, or throws 429 when it could evict and the person has no evictions left. */
  admit(accountId: string, sessionId: string): EvictionTicket {
    const bucket = this.#bucket(accountId) ?? { tokens: this.#perMinute, at: this.#clock.now(), holder: undefined, inFlight: 0 };
    const certainlyEvictsNobody = bucket.inFlight === 0 && (bucket.holder === null || bucket.holder === sessionId);
    const reserved = !certainlyEvictsNobody;
    if (reserved) {
      if (bucket.tokens < 1) {
        const retryAfterS = Math.max(1, Math.ceil(((1 - bucket.tokens) * 60) / this.#perMinute));
        throw new HttpError(
          429,
          'runtime_eviction_quota_exceeded',
          `this person's Runtimes took the lease from each other more than ${this.#perMinute} times in a minute; retry in ${retryAfterS} s`,
          { family: 'runtime', headers: { 'retry-after': String(retryAfterS) } },
        );
      }
      bucket.tokens -= 1;
    }
    bucket.inFlight += 1;
    this.#buckets.set(accountId, bucket);
    let done = false;
    const finish = (refund: number): void => {
      if (done) return;
      done = true;
      this.#bucket(accountId); // refills: the bucket stays in the map while anything is in flight
      bucket.inFlight -= 1;
      bucket.tokens = Math.min(this.#perMinute, bucket.tokens + refund);
      this.#keep(accountId, bucket);
    };
    return {
      settle: (holder, evicted) => {
        if (done) return;
        bucket.holder = holder;
        // Reserved and evicted: the token is spent. Not reserved but evicted (a holder this node did not know of, e.g.
        // after another node took the lease): charged now, which may leave the bucket below zero for a while.
        finish(reserved ? (evicted ? 0 : 1) : evicted ? -1 : 0);
      },
      cancel: () => finish(reserved ? 1 : 0),
    };
  }

  /** The person's lease ended without a successor (lapsed or released), as the lease actor decided it. */
  leaseEnded(accountId: string): void {
    const bucket = this.#bucket(accountId);
    if (!bucket) return;
    bucket.holder = null;
    this.#keep(accountId, bucket);
  }

  #keep(accountId: string, bucket: Bucket): void {
    // An unknown holder (every activation so far refused before the lease actor decided) is what a new bucket starts
    // with, so a full one says no more than a free lease does: kept, it would stay for good, since nothing of this
    // person may come again to drop it.
    const idle = (bucket.holder === null || bucket.holder === undefined) && bucket.inFlight === 0;
    if (idle && bucket.tokens >= this.#perMinute) {
      this.#buckets.delete(accountId);
      return;
    }
    this.#buckets.set(accountId, bucket);
    // Nothing of this person may ever come again to drop it (a tab that evicted, then closed): without a look once its
    // tokens are back, every person who evicted and then let the lease go would be held for good.
    if (idle && bucket.refilled === undefined) {
      const refillMs = Math.ceil(((this.#perMinute - bucket.tokens) * 60_000) / this.#perMinute);
      bucket.refilled = this.#clock.setTimeout(() => {
        bucket.refilled = undefined;
        if (this.#buckets.get(accountId) === bucket) this.#keep(accountId, this.#bucket(accountId)!);
      }, refillMs);
    }
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
