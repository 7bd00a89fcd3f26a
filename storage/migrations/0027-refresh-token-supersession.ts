import { sql, type Kysely } from 'kysely';

/**
 * When a refresh token was replaced rather than rotated: a retry within the reuse grace (identity/oauth-grants.ts)
 * spends the successor its lost reply carried, and that token must never earn a grace of its own. Its `used_at` alone
 * would let the holder of a replaced token (the party the retry took the sign-in from) retry it within the grace and
 * take the sign-in back, without the reuse ever being seen. Nullable without a default: added without rewriting the
 * table, and the rotation's own statement never writes it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE oauth_refresh_tokens ADD COLUMN superseded_at timestamptz`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE oauth_refresh_tokens DROP COLUMN superseded_at`.execute(db);
}
