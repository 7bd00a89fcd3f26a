import { sql, type Kysely } from 'kysely';

// Migrations take Kysely<unknown>: they must keep working after `Database` has moved on.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('actor_snapshots')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('version', 'int8', (c) => c.notNull().check(sql`version > 0`))
    .addColumn('epoch', 'int8', (c) => c.notNull().check(sql`epoch > 0`))
    .addColumn('snapshot', 'jsonb', (c) => c.notNull())
    .addColumn('timers', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('next_due_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('actor_snapshots_pk', ['kind', 'key'])
    .execute();
  await sql`CREATE INDEX actor_snapshots_next_due_at ON actor_snapshots (next_due_at) WHERE next_due_at IS NOT NULL`.execute(db);

  await db.schema
    .createTable('actor_journal')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('version', 'int8', (c) => c.notNull())
    .addColumn('epoch', 'int8', (c) => c.notNull())
    .addColumn('event', 'json', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('actor_journal_pk', ['kind', 'key', 'version'])
    .execute();
  // Append-only is a property of the table, not a convention of the code that happens to write it today.
  await sql`
    CREATE FUNCTION actor_journal_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'actor_journal is append-only' USING ERRCODE = 'restrict_violation';
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER actor_journal_no_update BEFORE UPDATE OR DELETE ON actor_journal
    FOR EACH ROW EXECUTE FUNCTION actor_journal_append_only()`.execute(db);

  await db.schema
    .createTable('idempotency_records')
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state IN ('pending', 'complete')`))
    .addColumn('status', 'int4')
    .addColumn('headers', 'jsonb')
    .addColumn('body', 'bytea')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_records_pk', ['scope', 'key'])
    .execute();
  await sql`CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('idempotency_records').execute();
  await db.schema.dropTable('actor_journal').execute();
  await sql`DROP FUNCTION actor_journal_append_only()`.execute(db);
  await db.schema.dropTable('actor_snapshots').execute();
}
