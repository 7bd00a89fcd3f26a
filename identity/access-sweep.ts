import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/database.js';
import { sweepStatements, type SweepOutcome, type SweepStatement } from '../storage/sweep.js';

/** How long spent or ended access records stay after they stopped mattering: long enough to read in an incident. */
export const ACCESS_RECORD_RETENTION_MS = 24 * 3600_000;
/** Grants outlive their end this much longer: the management session list and audits name them. */
export const GRANT_RETENTION_MS = 30 * 24 * 3600_000;
/** One run's time budget, shared by its statements: well inside the ten minutes between runs. */
const SWEEP_BUDGET_MS = 60_000;

/**
 * The sweep's statements in order, each named by the table it removes from (exported for the test of their plans).
 * `endedSince` (ms): the refresh tokens looked for are only those of grants that ended from then on (AccessRecordSweep).
 */
export function accessSweepStatements(now: number, endedSince?: number): readonly SweepStatement[] {
  const recent = new Date(now - ACCESS_RECORD_RETENTION_MS);
  const old = new Date(now - GRANT_RETENTION_MS);
  const since = endedSince === undefined ? undefined : new Date(endedSince);
  const ended = (column: 'expires_at' | 'revoked_at') =>
    since === undefined ? sql`g.${sql.ref(column)} < ${recent}` : sql`(g.${sql.ref(column)} >= ${since} AND g.${sql.ref(column)} < ${recent})`;
  return [
    ['oauth_codes', (limit) => sql`DELETE FROM oauth_codes WHERE code_hash IN (SELECT code_hash FROM oauth_codes WHERE expires_at < ${recent} LIMIT ${limit})`],
    ['browser_sessions', (limit) => sql`DELETE FROM browser_sessions WHERE id IN (SELECT id FROM browser_sessions WHERE expires_at < ${recent} OR revoked_at < ${recent} LIMIT ${limit})`],
    ['review_host_capabilities', (limit) => sql`
      DELETE FROM review_host_capabilities WHERE id IN (
        SELECT id FROM review_host_capabilities WHERE expires_at < ${recent} OR revoked_at < ${recent} LIMIT ${limit})`],
    ['oauth_refresh_tokens', (limit) => sql`
      DELETE FROM oauth_refresh_tokens WHERE token_hash IN (
        SELECT t.token_hash FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id
        WHERE ${ended('expires_at')} OR ${ended('revoked_at')} LIMIT ${limit})`],
    // After the refresh tokens: a grant goes once none of its tokens is left.
    ['oauth_grants', (limit) => sql`
      DELETE FROM oauth_grants g WHERE g.id IN (
        SELECT id FROM oauth_grants WHERE (expires_at < ${old} OR revoked_at < ${old})
        AND NOT EXISTS (SELECT 1 FROM oauth_refresh_tokens t WHERE t.grant_id = oauth_grants.id) LIMIT ${limit})`],
  ];
}

/**
 * A grant's tokens are looked for again this long before the cutoff of the last finished run: a revocation stamped by
 * a clock that has since stepped back a little is still found.
 */
const WINDOW_OVERLAP_MS = 3600_000;

/**
 * The scheduled access sweep. Refresh tokens go a day after their grant ended, the grant only after 30 days: looking
 * at every ended grant on every run read a month of sign-ins each time, almost all of them grants whose tokens were
 * gone. After a run that finished, the next looks at the grants that ended since that run's cutoff (less
 * WINDOW_OVERLAP_MS); the first run of a process, and every run after one that did not finish, at all of them. A
 * grant's end never moves into the past: `expires_at` is fixed when it is made, `revoked_at` stamped when it is revoked.
 */
export class AccessRecordSweep {
  readonly #db: Kysely<Database>;
  /** The token cutoff of the last run that finished: every grant that ended before it has no token left. */
  #sweptBefore: number | undefined;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** The statements a run at `now` executes (exported for the test of what they read). */
  statements(now: number): readonly SweepStatement[] {
    return accessSweepStatements(now, this.#sweptBefore === undefined ? undefined : this.#sweptBefore - WINDOW_OVERLAP_MS);
  }

  async run(now: number, signal?: AbortSignal): Promise<SweepOutcome> {
    const outcome = await sweepStatements(this.#db, this.statements(now), { budgetMs: SWEEP_BUDGET_MS, signal });
    if (outcome.done) this.#sweptBefore = now - ACCESS_RECORD_RETENTION_MS;
    return outcome;
  }
}
