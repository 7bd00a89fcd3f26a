import type { Kysely } from 'kysely';

/**
 * The configuration an operator gives an installed Plugin (for Media: its spaces and direct-call policy), one
 * document per installation, with who set it last and when. NULL until configured. Stored as written and checked
 * again on every read against the schema of the release then installed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('plugin_installations')
    .addColumn('configuration', 'jsonb')
    .addColumn('configured_by', 'text')
    .addColumn('configured_at', 'timestamptz')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('plugin_installations').dropColumn('configured_at').dropColumn('configured_by').dropColumn('configuration').execute();
}
