import { sql, type Kysely } from 'kysely';

/**
 * Plugin Grants: what an active Runtime hands a Plugin's backend component (the Media control plane) so it knows who
 * connects, under which live lease, with which scopes and context. Tokens are stored only as their SHA-256; a grant
 * ends at `expires_at`, on revocation, and (checked on every use) when its sign-in or its lease no longer holds.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('plugin_grants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('plugin_id', 'text', (c) => c.notNull())
    .addColumn('component', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('actor_id', 'text', (c) => c.notNull())
    .addColumn('environment_id', 'text', (c) => c.notNull())
    .addColumn('origin', 'text', (c) => c.notNull())
    .addColumn('oauth_grant_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('lease_id', 'text', (c) => c.notNull())
    .addColumn('lease_version', 'int8', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('roles', 'jsonb', (c) => c.notNull())
    .addColumn('context', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await sql`CREATE INDEX plugin_grants_by_session ON plugin_grants (session_id) WHERE revoked_at IS NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('plugin_grants').execute();
}
