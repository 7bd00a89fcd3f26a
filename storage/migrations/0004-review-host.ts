import { sql, type Kysely } from 'kysely';

/** Reviewer authority (granted by platform admins, audited) and the review host capabilities issued to its devices. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('reviewer_authorities')
    .addColumn('account_id', 'text', (c) => c.primaryKey())
    .addColumn('granted_by', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('granted_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('review_host_capabilities')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('device_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await sql`CREATE INDEX review_host_capabilities_by_account ON review_host_capabilities (account_id) WHERE revoked_at IS NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('review_host_capabilities').execute();
  await db.schema.dropTable('reviewer_authorities').execute();
}
