import type { Kysely } from 'kysely';
import { up as createUnusedCodesByBrowser } from './0009-unused-codes-by-browser.js';

/**
 * Replaces 0009's partial index (`browser_id WHERE used_at IS NULL`) with a plain one on `browser_id`.
 *
 * The partial index's predicate is also the token exchange's condition (`used_at IS NULL`), so Postgres could answer
 * an exchange by reading every unused code and hashing them against the batch — and did, whenever its statistics
 * counted fewer unused codes than there were (any burst of authorizations between two ANALYZEs): 8,600 codes read per
 * batch of 37 in the token bench, a cost that grows with the load instead of the batch. Its predicate column also made
 * every spend of a code a non-HOT update. Browser SSO logout, the index's reason to exist, finds a browser's codes just
 * as well through a plain index: a browser holds few.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('oauth_codes_unused_by_browser').execute();
  await db.schema.createIndex('oauth_codes_by_browser').on('oauth_codes').column('browser_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('oauth_codes_by_browser').execute();
  await createUnusedCodesByBrowser(db);
}
