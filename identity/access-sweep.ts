import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/database.js';

/** How long spent or ended access records stay after they stopped mattering: long enough to read in an incident. */
export const ACCESS_RECORD_RETENTION_MS = 24 * 3600_000;
/** Grants outlive their end this much longer: the management session list and audits name them. */
export const GRANT_RETENTION_MS = 30 * 24 * 3600_000;
const BATCH = 5_000;

/**
 * Removes access records that can no longer be used, a bounded batch per table per run: expired codes (a spent code
 * stays until then, so a replay inside its lifetime is still recognised and revokes its grant), sessions past their
 * end, and the refresh tokens of grants that ended. A live grant keeps its spent refresh tokens: they are how a
 * replayed one is recognised as reuse. Returns the number of rows removed.
 */
export async function sweepAccessRecords(db: Kysely<Database>, now: number): Promise<number> {
  const recent = new Date(now - ACCESS_RECORD_RETENTION_MS);
  const old = new Date(now - GRANT_RETENTION_MS);
  let removed = 0;
  const run = async (statement: ReturnType<typeof sql>): Promise<void> => {
    removed += Number((await statement.execute(db)).numAffectedRows ?? 0);
  };
  await run(sql`DELETE FROM oauth_codes WHERE code_hash IN (SELECT code_hash FROM oauth_codes WHERE expires_at < ${recent} LIMIT ${BATCH})`);
  await run(sql`DELETE FROM browser_sessions WHERE id IN (SELECT id FROM browser_sessions WHERE expires_at < ${recent} OR revoked_at < ${recent} LIMIT ${BATCH})`);
  await run(sql`
    DELETE FROM oauth_refresh_tokens WHERE token_hash IN (
      SELECT t.token_hash FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id
      WHERE g.expires_at < ${recent} OR g.revoked_at < ${recent} LIMIT ${BATCH})`);
  await run(sql`
    DELETE FROM oauth_grants g WHERE g.id IN (
      SELECT id FROM oauth_grants WHERE (expires_at < ${old} OR revoked_at < ${old})
      AND NOT EXISTS (SELECT 1 FROM oauth_refresh_tokens t WHERE t.grant_id = oauth_grants.id) LIMIT ${BATCH})`);
  return removed;
}
