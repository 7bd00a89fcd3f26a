import { sql, type Kysely } from 'kysely';

/**
 * An idempotency claim carries a token of its own, and only the request holding that token completes or abandons it.
 *
 * A claim whose request outlives the claim timeout is taken over by a retry; matched by key and fingerprint alone, the
 * late first request then stored its result into the retry's claim, or deleted it and let a third identical request
 * run alongside the retry. Claims pending when this runs have no token: their requests belonged to a server that has
 * stopped, and they expire as abandoned claims did before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE idempotency_records ADD COLUMN claim text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE idempotency_records DROP COLUMN claim`.execute(db);
}
