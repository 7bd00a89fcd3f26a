import { sql, type Kysely } from 'kysely';

/**
 * An authorization code keeps the sign-in time only when its request named `max_age`: the ID token carries `auth_time`
 * then (OIDC requires it) and only then, since the same second in every Environment's ID token would link their
 * pairwise subjects.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE oauth_codes ALTER COLUMN auth_time DROP NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`UPDATE oauth_codes SET auth_time = expires_at - interval '60 seconds' WHERE auth_time IS NULL`.execute(db);
  await sql`ALTER TABLE oauth_codes ALTER COLUMN auth_time SET NOT NULL`.execute(db);
}
