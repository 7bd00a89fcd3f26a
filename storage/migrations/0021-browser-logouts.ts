import { sql, type Kysely } from 'kysely';

/**
 * When each browser last logged out (browser SSO logout). A Runtime session whose creation was under way while its
 * browser logged out checks it once created: the logout may have looked for the browser's sessions before this one
 * existed. Kept a day (identity/access-sweep.ts), far longer than any creation takes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE browser_logouts (browser_id text PRIMARY KEY, logged_out_at timestamptz NOT NULL)`.execute(db);
  await sql`CREATE INDEX browser_logouts_by_time ON browser_logouts (logged_out_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE browser_logouts`.execute(db);
}
