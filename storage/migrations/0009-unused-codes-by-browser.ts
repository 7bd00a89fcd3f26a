import { sql, type Kysely } from 'kysely';

/**
 * Browser SSO logout spends the browser's unused authorization codes (`browser_id`, `used_at IS NULL`). Without an
 * index that was a scan of every code ever issued; codes are spent within minutes, so a partial index stays small.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('oauth_codes_unused_by_browser')
    .on('oauth_codes')
    .column('browser_id')
    .where(sql.ref('used_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('oauth_codes_unused_by_browser').execute();
}
