import type { Kysely } from 'kysely';

/**
 * The ids of device assertions already accepted, kept until they could no longer pass the time check. Memory alone
 * forgot them on restart, and an assertion captured before a restart could then be presented again inside its time
 * window. Rows are written once and swept after `expires_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('device_assertion_uses')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  // BRIN: rows arrive roughly in expiry order, and the sweep reads ranges; a btree would cost every insert far more.
  await db.schema.createIndex('device_assertion_uses_by_expiry').on('device_assertion_uses').using('brin').column('expires_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('device_assertion_uses').execute();
}
