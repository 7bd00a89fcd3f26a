import { sql, type Kysely } from 'kysely';

/**
 * An account's live browser sessions of one kind, oldest first: a new page or console session ends the account's
 * oldest beyond its cap (identity/live-session-caps.ts), and must find them without reading the whole table (the
 * table had no index by account). Revoked rows, kept a day for the sweep, are not in it. On a large table an operator
 * may build it first (`CREATE INDEX CONCURRENTLY browser_sessions_live_by_account ON browser_sessions (account_id,
 * kind, created_at) WHERE revoked_at IS NULL`); the migration then finds it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS browser_sessions_live_by_account ON browser_sessions (account_id, kind, created_at) WHERE revoked_at IS NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS browser_sessions_live_by_account`.execute(db);
}
