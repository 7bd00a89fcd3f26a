import { sql, type Kysely } from 'kysely';

/**
 * An account's unrevoked grants of one kind, by expiry: the count a new desktop management session is refused by
 * (identity/live-session-caps.ts) and the list of CLI sign-ins read the account's live grants only. By (account, kind)
 * alone they read every grant of that kind the sweep had not removed (revoked and expired grants stay 30 days), so
 * creating and revoking sessions made each next creation read more rows, without end. The index by (account, kind)
 * goes: nothing else reads by it, and every code exchange would keep both up to date.
 *
 * Built inside the migration's transaction, so writes to the table wait while it builds. On a database whose table is
 * already large, an operator builds it first (`CREATE INDEX CONCURRENTLY oauth_grants_live_by_account ON oauth_grants
 * (account_id, kind, expires_at) WHERE revoked_at IS NULL`); the migration then finds it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS oauth_grants_live_by_account ON oauth_grants (account_id, kind, expires_at) WHERE revoked_at IS NULL`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_grants_by_account`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS oauth_grants_by_account ON oauth_grants (account_id, kind)`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_grants_live_by_account`.execute(db);
}
