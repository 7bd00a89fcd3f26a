import type { SweepOutcome } from './sweep.js';

/**
 * Remembers the outcome of requests sent with an `Idempotency-Key`, per caller scope, so a retry gets the original
 * result instead of a second execution.
 */
export interface IdempotencyStore {
  /**
   * Claims `key` for a request with this fingerprint. `started`: the caller runs the request and must `complete` or
   * `abandon` with the claim's token. Otherwise the existing record answers: a stored result to replay, a different
   * request under the same key, or the same request still running.
   */
  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyClaim>;
  /**
   * Stores the result of the request holding `claim`. A claim that expired and was taken over by a retry is no longer
   * this request's: it is left to the retry, and this result is not stored.
   */
  complete(scope: string, key: string, claim: string, result: StoredResult): Promise<void>;
  /**
   * Drops the claim `claim` when its request produced no result worth replaying (server failure), so a retry runs
   * again; a claim taken over since is left alone.
   */
  abandon(scope: string, key: string, claim: string): Promise<void>;
  /** Deletes every expired record, in bounded statements, for at most a few seconds (or until `signal` aborts). */
  sweep(signal?: AbortSignal): Promise<SweepOutcome>;
}

export type IdempotencyClaim =
  /** `claim` is this request's token: a retry that takes the claim over after it expired gets another. */
  | { readonly kind: 'started'; readonly claim: string }
  | { readonly kind: 'replay'; readonly result: StoredResult }
  | { readonly kind: 'mismatch' }
  | { readonly kind: 'in_progress' };

export interface StoredResult {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}
