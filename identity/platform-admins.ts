import type { Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database } from '../storage/database.js';
import { writeAudit } from './audit.js';

export const ADMIN_REASON = { min: 3, max: 1000 } as const;

/**
 * Platform-admin authority. A grant and its `platform.admin.grant` audit event commit in one transaction; granting
 * to an existing admin changes nothing and records nothing, so a retry is harmless.
 */
export class PlatformAdmins {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;

  constructor(db: Kysely<Database>, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  async isAdmin(accountId: string): Promise<boolean> {
    const row = await this.#db.selectFrom('platform_admins').select('account_id').where('account_id', '=', accountId).executeTakeFirst();
    return row !== undefined;
  }

  /** Grants admin to an existing account (the caller checks it exists). True when this call made the change. */
  async grant(accountId: string, actor: string, reason: string): Promise<boolean> {
    return grantAuthority(this.#db, 'platform_admins', 'platform.admin.grant', { accountId, actor, reason, at: new Date(this.#clock.now()) });
  }
}

/**
 * An authority held by an account (platform admin, reviewer): the row and its audit event commit together, and
 * granting what is already held changes and records nothing. True when this call made the change.
 */
export async function grantAuthority(
  db: Kysely<Database>,
  table: 'platform_admins' | 'reviewer_authorities',
  action: string,
  grant: { accountId: string; actor: string; reason: string; at: Date },
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto(table)
      .values({ account_id: grant.accountId, granted_by: grant.actor, reason: grant.reason, granted_at: grant.at })
      .onConflict((oc) => oc.column('account_id').doNothing())
      .returning('account_id')
      .executeTakeFirst();
    if (!inserted) return false;
    await writeAudit(trx, { action, actor: grant.actor, target: `account:${grant.accountId}`, reason: grant.reason }, grant.at);
    return true;
  });
}
