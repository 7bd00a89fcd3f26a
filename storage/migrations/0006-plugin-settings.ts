import { sql, type Kysely } from 'kysely';

/**
 * Plugins installed per Environment, and the persisted layers of their settings, one row per leaf. A leaf row names
 * its layer and whom it belongs to: `environment` rows an Environment (account ''), `user` rows an account across
 * Environments (environment ''), `user_environment` rows both. The empty string rather than NULL keeps the primary
 * key a plain one on every Postgres version. Values are stored as the caller sent them and validated again on every
 * read, against the schema installed then.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('plugin_installations')
    .addColumn('environment_id', 'text', (c) => c.notNull().references('environments.id'))
    .addColumn('plugin_id', 'text', (c) => c.notNull())
    .addColumn('installed_by', 'text', (c) => c.notNull())
    .addColumn('installed_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('plugin_installations_pk', ['environment_id', 'plugin_id'])
    .execute();

  await db.schema
    .createTable('plugin_settings')
    .addColumn('plugin_id', 'text', (c) => c.notNull())
    .addColumn('layer', 'text', (c) => c.notNull().check(sql`layer in ('environment', 'user', 'user_environment')`))
    .addColumn('environment_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('setting', 'text', (c) => c.notNull())
    .addColumn('value', 'jsonb', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('plugin_settings_pk', ['plugin_id', 'environment_id', 'account_id', 'setting'])
    .addCheckConstraint('plugin_settings_owner', sql`(layer = 'user') = (environment_id = '') and (layer = 'environment') = (account_id = '')`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('plugin_settings').execute();
  await db.schema.dropTable('plugin_installations').execute();
}
