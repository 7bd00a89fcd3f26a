import type { Kysely } from 'kysely';

/**
 * Environments looked up by origin: a cross-origin page's CORS preflight names only its origin, and the gateway allows
 * the origins of registered Environments.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('environments_by_origin').on('environments').column('origin').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('environments_by_origin').execute();
}
