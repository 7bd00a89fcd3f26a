import { sql, type Kysely } from 'kysely';
import { ACCESS_RECORD_RETENTION_MS } from '../identity/access-sweep.js';
import type { Database } from '../storage/database.js';
import { sweepStatements, type SweepOutcome, type SweepStatement } from '../storage/sweep.js';

/**
 * A grant is kept this long after it expired, to read in an incident, then removed (a revoked one too: grants live
 * minutes, so counting from expiry rather than revocation keeps it minutes longer, and lets the sweep find its rows by
 * one index). Nothing answers differently for it: introspection finds an unknown token inactive, as it found the
 * ended grant; only revoking it again answers 404 instead of 204.
 */
export const ENDED_GRANT_RETENTION_MS = ACCESS_RECORD_RETENTION_MS;
/** One run's time budget: well inside the ten minutes between runs. */
const SWEEP_BUDGET_MS = 60_000;

/**
 * Removes the Environment Backend Grants and Plugin Grants that expired more than ENDED_GRANT_RETENTION_MS before
 * `now`. Runtimes ask for short-lived grants all day long: kept for ever, the tables (and their by-session indexes,
 * which an expired but never revoked grant stays in) would only grow.
 */
export function sweepEndedRuntimeGrants(db: Kysely<Database>, now: number, signal?: AbortSignal): Promise<SweepOutcome> {
  return sweepStatements(db, runtimeGrantSweepStatements(now), { budgetMs: SWEEP_BUDGET_MS, signal });
}

/** The sweep's statements, each named by the table it removes from (exported for the test of their plans). */
export function runtimeGrantSweepStatements(now: number): readonly SweepStatement[] {
  const expired = new Date(now - ENDED_GRANT_RETENTION_MS);
  return ['environment_backend_grants', 'plugin_grants'].map((table) => [
    table,
    (limit: number) => sql`DELETE FROM ${sql.table(table)} WHERE id IN (SELECT id FROM ${sql.table(table)} WHERE expires_at < ${expired} LIMIT ${limit})`,
  ] as const);
}
