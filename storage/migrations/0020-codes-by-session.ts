import { sql, type Kysely } from 'kysely';

/**
 * An authorization code names the page session that authorized it, so that its exchange can hold that session (a row
 * lock) and refuse once it is revoked: a browser logout then either sees the grant the exchange made, or the exchange
 * sees the logout. Codes of earlier versions (none outlives a minute) have none and are exchanged as before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE oauth_codes ADD COLUMN session_id text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE oauth_codes DROP COLUMN session_id`.execute(db);
}
