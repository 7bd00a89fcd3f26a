import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../database.js';
import type { IdempotencyClaim, IdempotencyStore, StoredResult } from '../idempotency-store.js';
import { sweepStatements, type SweepOutcome } from '../sweep.js';

/** One sweep's time budget: well inside the minute between sweeps, so runs never overlap. */
const SWEEP_BUDGET_MS = 20_000;

export interface IdempotencyTimings {
  /** How long a completed result is replayed. */
  readonly retentionSeconds: number;
  /** How long a claim whose request never finished (crashed node) blocks its key. */
  readonly claimTimeoutSeconds: number;
}

export class PostgresIdempotencyStore implements IdempotencyStore {
  readonly #db: Kysely<Database>;
  readonly #timings: IdempotencyTimings;

  constructor(db: Kysely<Database>, timings: IdempotencyTimings) {
    this.#db = db;
    this.#timings = timings;
  }

  async begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyClaim> {
    const claim = randomBytes(16).toString('base64url');
    // Insert, or take over a record that has expired (a finished one past retention or an abandoned claim).
    const claimed = await sql<{ scope: string }>`
      INSERT INTO idempotency_records (scope, key, fingerprint, state, claim, expires_at)
      VALUES (${scope}, ${key}, ${fingerprint}, 'pending', ${claim},
              now() + make_interval(secs => ${this.#timings.claimTimeoutSeconds}))
      ON CONFLICT (scope, key) DO UPDATE
         SET fingerprint = excluded.fingerprint, state = 'pending', claim = excluded.claim, status = NULL,
             headers = NULL, body = NULL, created_at = now(), expires_at = excluded.expires_at
       WHERE idempotency_records.expires_at < now()
      RETURNING scope`.execute(this.#db);
    if (claimed.rows.length > 0) return { kind: 'started', claim };
    const existing = await this.#db
      .selectFrom('idempotency_records')
      .select(['fingerprint', 'state', 'status', 'headers', 'body'])
      .where('scope', '=', scope)
      .where('key', '=', key)
      .executeTakeFirst();
    // Deleted between the two statements (abandoned): the caller may simply try again.
    if (!existing) return { kind: 'in_progress' };
    if (existing.fingerprint !== fingerprint) return { kind: 'mismatch' };
    if (existing.state === 'pending' || existing.status === null) return { kind: 'in_progress' };
    return {
      kind: 'replay',
      result: { status: existing.status, headers: existing.headers ?? {}, body: existing.body ?? Buffer.alloc(0) },
    };
  }

  async complete(scope: string, key: string, claim: string, result: StoredResult): Promise<void> {
    await this.#db
      .updateTable('idempotency_records')
      .set({
        state: 'complete',
        status: result.status,
        headers: JSON.stringify(result.headers),
        body: result.body,
        expires_at: sql<Date>`now() + make_interval(secs => ${this.#timings.retentionSeconds})`,
      })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('claim', '=', claim)
      .where('state', '=', 'pending')
      .execute();
  }

  async abandon(scope: string, key: string, claim: string): Promise<void> {
    await this.#db
      .deleteFrom('idempotency_records')
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('claim', '=', claim)
      .where('state', '=', 'pending')
      .execute();
  }

  sweep(signal?: AbortSignal): Promise<SweepOutcome> {
    const expired = (limit: number) => sql`
      DELETE FROM idempotency_records
       WHERE ctid IN (SELECT ctid FROM idempotency_records WHERE expires_at < now() LIMIT ${limit})`;
    return sweepStatements(this.#db, [['idempotency_records', expired]], { budgetMs: SWEEP_BUDGET_MS, signal });
  }
}
