import { sql, type Kysely } from 'kysely';

/**
 * The Runtime plane beside its actors: which Runtime sessions a browser opened (so browser SSO logout finds them),
 * the backend each Environment declares, and the Environment Backend Grants issued for it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('runtime_session_browsers')
    .addColumn('browser_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('runtime_session_browsers_pk', ['browser_id', 'session_id'])
    .execute();

  await db.schema
    .createTable('environment_backends')
    .addColumn('environment_id', 'text', (c) => c.primaryKey().references('environments.id'))
    .addColumn('endpoint', 'text', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('environment_backend_grants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('actor_id', 'text', (c) => c.notNull())
    .addColumn('environment_id', 'text', (c) => c.notNull())
    .addColumn('origin', 'text', (c) => c.notNull())
    .addColumn('oauth_grant_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('lease_id', 'text', (c) => c.notNull())
    .addColumn('lease_version', 'int8', (c) => c.notNull())
    .addColumn('endpoint', 'text', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('roles', 'jsonb', (c) => c.notNull())
    .addColumn('context', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('revoked_reason', 'text')
    .execute();
  await sql`CREATE INDEX environment_backend_grants_by_session ON environment_backend_grants (session_id) WHERE revoked_at IS NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('environment_backend_grants').execute();
  await db.schema.dropTable('environment_backends').execute();
  await db.schema.dropTable('runtime_session_browsers').execute();
}
