import { sql, type Kysely } from 'kysely';

/**
 * A browser's authorization codes by expiry, replacing 0010's index by browser alone: a browser logout spends the
 * codes that could still be exchanged (identity/browser-sessions.ts), and by the browser alone it read every code the
 * browser was issued that the sweep had not removed (a day after their expiry), so authorizing again and again in one
 * browser made each logout read more rows, without end. A code lives a minute: the range read is that minute's codes.
 * A plain index, not a partial one on `used_at IS NULL`, for 0010's reason (the token exchange's plan).
 *
 * Built inside the migration's transaction, so writes to the table wait while it builds. On a database whose table is
 * already large, an operator builds it first (`CREATE INDEX CONCURRENTLY oauth_codes_by_browser_expiry ON oauth_codes
 * (browser_id, expires_at)`); the migration then finds it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS oauth_codes_by_browser_expiry ON oauth_codes (browser_id, expires_at)`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_codes_by_browser`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS oauth_codes_by_browser ON oauth_codes (browser_id)`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_codes_by_browser_expiry`.execute(db);
}
