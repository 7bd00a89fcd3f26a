import { sql, type Kysely } from 'kysely';

/**
 * Used device-assertion ids are stored one row per group commit (an array of ids) instead of one row per id.
 *
 * The row per id made every device-authenticated request pay a primary-key insert of a random text key, a heap tuple
 * and its WAL: together about a tenth of what the whole request cost on a two-core machine (Postgres and the
 * signature checks share the cores). The store's only reader is a starting server, which reloads the ids still inside
 * their time window into memory; memory answers every check while the process runs. The primary key's cross-process
 * refusal is given up with it: one server owns a database until cluster mode brings a shared check (docs/decisions.md,
 * "Device plane").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE device_assertion_use_batches (
      expires_at timestamptz NOT NULL,
      ids text[] NOT NULL
    )`.execute(db);
  // BRIN: rows arrive in expiry order, and both the sweep and the reload read a range of it.
  await sql`CREATE INDEX device_assertion_use_batches_by_expiry ON device_assertion_use_batches USING brin (expires_at)`.execute(db);
  await sql`
    INSERT INTO device_assertion_use_batches (expires_at, ids)
    SELECT max(expires_at), array_agg(id) FROM device_assertion_uses WHERE expires_at > now() HAVING count(*) > 0`.execute(db);
  await sql`DROP TABLE device_assertion_uses`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE device_assertion_uses (id text PRIMARY KEY, expires_at timestamptz NOT NULL)`.execute(db);
  await sql`CREATE INDEX device_assertion_uses_by_expiry ON device_assertion_uses USING brin (expires_at)`.execute(db);
  await sql`
    INSERT INTO device_assertion_uses (id, expires_at)
    SELECT DISTINCT ON (id) id, expires_at FROM device_assertion_use_batches, unnest(ids) AS id ORDER BY id, expires_at DESC`.execute(db);
  await sql`DROP TABLE device_assertion_use_batches`.execute(db);
}
