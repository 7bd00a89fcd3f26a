import { sql, type Kysely } from 'kysely';

/**
 * A browser's sessions by account, and its live ones. Making a session asks whether the browser holds sessions of
 * another account (identity/browser-sessions.ts), and a logout locks the browser's live sessions: by the browser alone
 * both read every session the browser had, ended ones included (each stays a day for the sweep), so one device making
 * page sessions in one browser made each of its next requests read more rows, without end. Whether the browser holds
 * another account's sessions is now two probes of the first index (its least and greatest account), its live sessions
 * a read of the second; the index by browser alone goes, as the first serves every lookup it did.
 *
 * Built inside the migration's transaction, so writes to the table wait while they build. On a database whose table
 * is already large, an operator builds them first (`CREATE INDEX CONCURRENTLY browser_sessions_by_browser_account ON
 * browser_sessions (browser_id, account_id)`, `CREATE INDEX CONCURRENTLY browser_sessions_live_by_browser ON
 * browser_sessions (browser_id) WHERE revoked_at IS NULL`); the migration then finds them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS browser_sessions_by_browser_account ON browser_sessions (browser_id, account_id)`.execute(db);
  await sql`CREATE INDEX IF NOT EXISTS browser_sessions_live_by_browser ON browser_sessions (browser_id) WHERE revoked_at IS NULL`.execute(db);
  await sql`DROP INDEX IF EXISTS browser_sessions_by_browser`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS browser_sessions_by_browser ON browser_sessions (browser_id)`.execute(db);
  await sql`DROP INDEX IF EXISTS browser_sessions_live_by_browser`.execute(db);
  await sql`DROP INDEX IF EXISTS browser_sessions_by_browser_account`.execute(db);
}
