/**
 * Remembers the outcome of requests sent with an `Idempotency-Key`, per caller scope, so a retry gets the original
 * result instead of a second execution.
 */
export interface IdempotencyStore {
  /**
   * Claims `key` for a request with this fingerprint. `started`: the caller runs the request and must `complete` or
   * `abandon`. Otherwise the existing record answers: a stored result to replay, a different request under the same
   * key, or the same request still running.
   */
  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyClaim>;
  complete(scope: string, key: string, fingerprint: string, result: StoredResult): Promise<void>;
  /** Drops a claim whose request produced no result worth replaying (server failure), so a retry runs again. */
  abandon(scope: string, key: string, fingerprint: string): Promise<void>;
  /** Deletes expired records; returns how many. */
  sweep(limit: number): Promise<number>;
}

export type IdempotencyClaim =
  | { readonly kind: 'started' }
  | { readonly kind: 'replay'; readonly result: StoredResult }
  | { readonly kind: 'mismatch' }
  | { readonly kind: 'in_progress' };

export interface StoredResult {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}
