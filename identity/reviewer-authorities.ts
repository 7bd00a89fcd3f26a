import type { Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database } from '../storage/database.js';
import { writeAudit } from './audit.js';
import { newId } from './ids.js';
import { LIVE_SESSION_CAPS, liveSessionQuotaExceeded, lockAccountSessions, retryAfterSeconds } from './live-session-caps.js';
import { grantAuthority } from './platform-admins.js';
import { hashToken, newOpaqueToken } from './opaque-tokens.js';

/** A review host capability is short-lived and fixed-purpose: the review host asks for a new one per session. */
export const HOST_CAPABILITY_TTL_MS = 15 * 60_000;

const CAPABILITY_PREFIX = 'rhc';
const CAPABILITY_TOKEN = new RegExp(`^${CAPABILITY_PREFIX}_[A-Za-z0-9_-]{43}$`);

/** Whether `token` has the form of a capability this registry issues (whether or not it still holds it). */
export function isCapabilityToken(token: string): boolean {
  return CAPABILITY_TOKEN.test(token);
}

export interface ReviewerAuthority {
  readonly accountId: string;
  readonly grantedBy: string;
  readonly reason: string;
  readonly grantedAt: number;
}

export interface HostCapability {
  readonly id: string;
  readonly accountId: string;
  readonly deviceId: string;
  readonly expiresAt: number;
  readonly live: boolean;
}

/**
 * Reviewer authority: explicit and revocable, separate from platform admin and from Runtime roles (an administrator
 * needs it too, and may grant it to themselves). Each grant and revocation commits with its audit event; revoking also
 * ends every review host capability of the account. Capabilities are issued to one device and used with its assertion.
 */
export class ReviewerAuthorities {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;

  constructor(db: Kysely<Database>, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  async holds(accountId: string): Promise<boolean> {
    return (await this.#db.selectFrom('reviewer_authorities').select('account_id').where('account_id', '=', accountId).executeTakeFirst()) !== undefined;
  }

  async list(): Promise<ReviewerAuthority[]> {
    const rows = await this.#db.selectFrom('reviewer_authorities').selectAll().orderBy('granted_at').execute();
    return rows.map((r) => ({ accountId: r.account_id, grantedBy: r.granted_by, reason: r.reason, grantedAt: r.granted_at.getTime() }));
  }

  /** True when this call made the change; granting to a reviewer changes and records nothing. */
  async grant(accountId: string, actor: string, reason: string): Promise<boolean> {
    return grantAuthority(this.#db, 'reviewer_authorities', 'reviewer.authority.grant', { accountId, actor, reason, at: new Date(this.#clock.now()) });
  }

  /** True when this call made the change; revoking from a non-reviewer changes and records nothing. */
  async revoke(accountId: string, actor: string, reason: string): Promise<boolean> {
    const at = new Date(this.#clock.now());
    return this.#db.transaction().execute(async (trx) => {
      const removed = await trx.deleteFrom('reviewer_authorities').where('account_id', '=', accountId).returning('account_id').executeTakeFirst();
      if (!removed) return false;
      const ended = await trx
        .updateTable('review_host_capabilities')
        .set({ revoked_at: at })
        .where('account_id', '=', accountId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      await writeAudit(
        trx,
        { action: 'reviewer.authority.revoke', actor, target: `account:${accountId}`, reason, data: { capabilitiesEnded: Number(ended.numUpdatedRows) } },
        at,
      );
      return true;
    });
  }

  /**
   * Issues a capability to one device of an account holding reviewer authority; undefined when it holds none. The
   * authority is read under a share lock in the issuing transaction, so a revocation (which deletes that row, then ends
   * the account's capabilities) either waits for the issuance and ends its capability too, or commits first and the
   * issuance finds no authority: a capability never outlives the revocation it raced. At most
   * LIVE_SESSION_CAPS.reviewCapability live per account: past that, 429 `review_host_capability_quota_exceeded`.
   * `removedDeviceIds`: the account's removed devices, whose capabilities are not counted: nobody can use or release
   * them any more (both need the device's assertion), so counted they would hold the account's places for their 15
   * minutes, a stolen device's filling the cap before its removal. A device removed after they were read is still
   * counted, which only refuses sooner.
   */
  async issueCapability(accountId: string, deviceId: string, removedDeviceIds: readonly string[]): Promise<{ id: string; token: string; expiresAt: number } | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      // The account's issuances take turns (an advisory lock, before the authority's row lock): of issuances racing at
      // the cap exactly the places left are made.
      await lockAccountSessions(trx, 'reviewCapability', accountId);
      const held = await trx.selectFrom('reviewer_authorities').select('account_id').where('account_id', '=', accountId).forShare().executeTakeFirst();
      if (!held) return undefined;
      const now = this.#clock.now();
      const live = await trx
        .selectFrom('review_host_capabilities')
        .select([(eb) => eb.fn.countAll<string>().as('count'), (eb) => eb.fn.min('expires_at').as('first_end')])
        .where('account_id', '=', accountId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', new Date(now))
        .$if(removedDeviceIds.length > 0, (qb) => qb.where('device_id', 'not in', removedDeviceIds))
        .executeTakeFirstOrThrow();
      const cap = LIVE_SESSION_CAPS.reviewCapability;
      if (Number(live.count) >= cap) {
        throw liveSessionQuotaExceeded(
          'review_host_capability_quota_exceeded',
          `this account already holds ${cap} live review host capabilities; release one (DELETE /v1/review/host-capabilities/{capabilityId}) or wait for the oldest to end`,
          retryAfterSeconds(new Date(live.first_end as Date).getTime(), now),
        );
      }
      const secret = newOpaqueToken(CAPABILITY_PREFIX);
      const id = newId('hcap');
      const expiresAt = now + HOST_CAPABILITY_TTL_MS;
      await trx
        .insertInto('review_host_capabilities')
        .values({ id, secret_hash: secret.hash, account_id: accountId, device_id: deviceId, created_at: new Date(now), expires_at: new Date(expiresAt) })
        .execute();
      return { id, token: secret.token, expiresAt };
    });
  }

  /** The capability a secret names, live or not (releasing an ended one is still an exact, answerable request). */
  async capability(token: string): Promise<HostCapability | undefined> {
    if (token.length > 128) return undefined;
    const row = await this.#db.selectFrom('review_host_capabilities').selectAll().where('secret_hash', '=', hashToken(token)).executeTakeFirst();
    if (!row) return undefined;
    const live = row.revoked_at === null && row.expires_at.getTime() > this.#clock.now();
    return { id: row.id, accountId: row.account_id, deviceId: row.device_id, expiresAt: row.expires_at.getTime(), live };
  }

  async release(capabilityId: string): Promise<void> {
    await this.#db
      .updateTable('review_host_capabilities')
      .set({ revoked_at: new Date(this.#clock.now()) })
      .where('id', '=', capabilityId)
      .where('revoked_at', 'is', null)
      .execute();
  }
}
