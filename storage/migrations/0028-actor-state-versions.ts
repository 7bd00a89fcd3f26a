import { sql, type Kysely } from 'kysely';

/**
 * Every snapshot row and journal segment records the state version of its kind it was written at
 * (ActorKind.stateVersion), so that loading can upgrade what an older release stored, step by step, and refuse what a
 * newer one did. Everything stored before is version 1, the version of every kind until one declares a step. A
 * constant default and no CHECK: Postgres adds the column without rewriting or scanning either table (the journal only
 * grows), and the journal's append-only trigger (row-level) is not involved.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE actor_snapshots ADD COLUMN state_version int4 NOT NULL DEFAULT 1`.execute(db);
  await sql`ALTER TABLE actor_journal ADD COLUMN state_version int4 NOT NULL DEFAULT 1`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE actor_journal DROP COLUMN state_version`.execute(db);
  await sql`ALTER TABLE actor_snapshots DROP COLUMN state_version`.execute(db);
}
