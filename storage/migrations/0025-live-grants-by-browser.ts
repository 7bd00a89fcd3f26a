import { sql, type Kysely } from 'kysely';

/**
 * The unrevoked Environment grants authorized in a browser, by expiry: what a browser logout revokes
 * (identity/browser-sessions.ts). By the browser alone it read every grant the browser ever authorized that the sweep
 * had not removed (ended grants stay 30 days), so signing in to Environments again and again in one browser made each
 * logout read more rows, without end. It replaces the index by browser, which nothing else reads by.
 *
 * Built inside the migration's transaction, so writes to the table wait while it builds. On a database whose table is
 * already large, an operator builds it first (`CREATE INDEX CONCURRENTLY oauth_grants_live_by_browser ON oauth_grants
 * (browser_id, expires_at) WHERE revoked_at IS NULL AND kind = 'environment'`); the migration then finds it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS oauth_grants_live_by_browser ON oauth_grants (browser_id, expires_at) WHERE revoked_at IS NULL AND kind = 'environment'`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_grants_by_browser`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS oauth_grants_by_browser ON oauth_grants (browser_id)`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_grants_live_by_browser`.execute(db);
}
