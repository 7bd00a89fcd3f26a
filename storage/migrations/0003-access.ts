import { sql, type Kysely } from 'kysely';

/**
 * Access state that is a set of rows rather than one contended state machine: registered Environments and their OIDC
 * clients, browser sessions, OAuth grants with their codes and refresh tokens, platform admins and the audit trail.
 * Each transition is one conditional statement (a code is consumed, a refresh token rotated, a grant revoked), so
 * concurrent requests race in Postgres and exactly one wins.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('registry_secrets')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('secret', 'bytea', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('environments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('origin', 'text', (c) => c.notNull())
    .addColumn('owner_account_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('oidc_clients')
    .addColumn('client_id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('environment', 'cli')`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('environment_id', 'text', (c) => c.references('environments.id'))
    .addColumn('redirect_uris', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('browser_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('page', 'console')`))
    .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
    .addColumn('browser_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('account_epoch', 'int8', (c) => c.notNull())
    .addColumn('device_id', 'text')
    .addColumn('grant_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('revoked_reason', 'text')
    .execute();
  await db.schema.createIndex('browser_sessions_by_browser').on('browser_sessions').columns(['browser_id']).execute();

  await db.schema
    .createTable('oauth_grants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('environment', 'cli', 'desktop')`))
    .addColumn('client_id', 'text', (c) => c.references('oidc_clients.client_id'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('account_epoch', 'int8', (c) => c.notNull())
    .addColumn('device_id', 'text')
    .addColumn('browser_id', 'text')
    .addColumn('environment_id', 'text')
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_used_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('revoked_reason', 'text')
    .execute();
  await db.schema.createIndex('oauth_grants_by_account').on('oauth_grants').columns(['account_id', 'kind']).execute();
  await db.schema.createIndex('oauth_grants_by_browser').on('oauth_grants').columns(['browser_id']).execute();

  await db.schema
    .createTable('oauth_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oidc_clients.client_id'))
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('nonce', 'text')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('account_epoch', 'int8', (c) => c.notNull())
    .addColumn('browser_id', 'text', (c) => c.notNull())
    .addColumn('auth_time', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz')
    .addColumn('grant_id', 'text')
    .execute();

  await db.schema
    .createTable('oauth_refresh_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('grant_id', 'text', (c) => c.notNull().references('oauth_grants.id'))
    .addColumn('generation', 'int4', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('oauth_refresh_tokens_by_grant').on('oauth_refresh_tokens').columns(['grant_id']).execute();

  await db.schema
    .createTable('oauth_consents')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oidc_clients.client_id'))
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('granted_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('oauth_consents_pk', ['account_id', 'client_id'])
    .execute();

  await db.schema
    .createTable('platform_admins')
    .addColumn('account_id', 'text', (c) => c.primaryKey())
    .addColumn('granted_by', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('granted_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('audit_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('audit_events_by_target').on('audit_events').columns(['target', 'id']).execute();
  // The audit trail, like the actor journal, is append-only: history cannot be rewritten by the application.
  await sql`
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'restrict_violation';
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['audit_events', 'platform_admins', 'oauth_consents', 'oauth_refresh_tokens', 'oauth_codes', 'oauth_grants', 'browser_sessions', 'oidc_clients', 'environments', 'registry_secrets']) {
    await db.schema.dropTable(table).execute();
  }
  await sql`DROP FUNCTION audit_events_append_only()`.execute(db);
}
