import type { RuntimeCaller } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import type { RuntimeSessions } from './runtime-sessions.js';

/** What a fenced grant remembers of the Runtime it was issued to. */
export interface GrantFence {
  readonly account_id: string;
  readonly oauth_grant_id: string;
  readonly session_id: string;
  readonly lease_id: string;
  readonly lease_version: number;
}

/**
 * Whether the fence a grant was issued under still holds: its sign-in is live (no logout, revocation or account epoch
 * change) and the same session still holds the same lease at the same version (not superseded, released or lapsed).
 */
async function grantFenceHolds(
  fence: GrantFence,
  sessions: RuntimeSessions,
  signInLive: (oauthGrantId: string) => Promise<boolean>,
): Promise<boolean> {
  if (!(await signInLive(fence.oauth_grant_id))) return false;
  const holder = await sessions.leaseHolder(fence.account_id);
  return holder !== null && holder.sessionId === fence.session_id && holder.leaseId === fence.lease_id && holder.version === fence.lease_version;
}

/** A fenced grant's row, as far as deciding whether it holds and what its backend sees. */
export interface FencedGrantRow extends GrantFence {
  readonly id: string;
  readonly actor_id: string;
  readonly environment_id: string;
  readonly origin: string;
  readonly roles: readonly string[];
  readonly scopes: readonly string[];
  readonly expires_at: Date;
  readonly revoked_at: Date | null;
}

/** What a backend learns of a fenced grant that holds: whose, where, for what, under which fence, until when. */
export interface LiveFencedGrant {
  readonly grantId: string;
  readonly actorId: string;
  readonly environmentId: string;
  readonly origin: string;
  readonly environmentRoles: readonly string[];
  readonly scopes: readonly string[];
  readonly sessionId: string;
  readonly leaseVersion: number;
  readonly expiresAt: number;
}

/**
 * The grant as its backend sees it, if it holds at `now`: not revoked, not expired, and its fence still holding
 * (`grantFenceHolds`); undefined otherwise, whatever the reason.
 */
export async function liveFencedGrant(
  row: FencedGrantRow,
  now: number,
  sessions: RuntimeSessions,
  signInLive: (oauthGrantId: string) => Promise<boolean>,
): Promise<LiveFencedGrant | undefined> {
  if (row.revoked_at !== null || row.expires_at.getTime() <= now) return undefined;
  if (!(await grantFenceHolds(row, sessions, signInLive))) return undefined;
  return {
    grantId: row.id,
    actorId: row.actor_id,
    environmentId: row.environment_id,
    origin: row.origin,
    environmentRoles: row.roles,
    scopes: row.scopes,
    sessionId: row.session_id,
    leaseVersion: row.lease_version,
    expiresAt: row.expires_at.getTime(),
  };
}

/**
 * What a page asks for by name in a grant: lower-case, with `.`, `:`, `_` and `-` (e.g. `media:publish`), optionally
 * pinned to a contract version (`@1`, `@1.0.0`), as the spec spells the scope an Environment Backend Grant carries to
 * publish notifications (`notifications.publish@1.0.0`).
 */
export const GRANT_SCOPE = /^[a-z][a-z0-9_.:-]{0,63}(?:@[0-9]{1,9}(?:\.[0-9]{1,9}){0,2})?$/;

/** The Runtime fence a grant is issued under: the active session, its lease and that lease's version. */
export interface IssuingFence {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly leaseVersion: number;
}

/** The columns every fenced grant table stores about who asked, under which fence, and for how long. */
export function fencedGrantColumns(caller: RuntimeCaller, fence: IssuingFence, environmentRoles: readonly string[], now: number, expiresAt: number) {
  return {
    account_id: caller.accountId,
    actor_id: caller.actorId,
    environment_id: caller.environmentId,
    origin: caller.origin,
    oauth_grant_id: caller.grantId,
    session_id: fence.sessionId,
    lease_id: fence.leaseId,
    lease_version: fence.leaseVersion,
    roles: JSON.stringify(environmentRoles),
    created_at: new Date(now),
    expires_at: new Date(expiresAt),
  };
}

/** 422 `scope_not_declared`, pointing at each requested scope that `declared` does not hold. */
export function refuseUndeclaredScopes(requested: readonly string[], declared: readonly string[], who: string): void {
  const undeclared = requested.map((scope, i) => [scope, i] as const).filter(([scope]) => !declared.includes(scope));
  if (undeclared.length === 0) return;
  throw new HttpError(422, 'scope_not_declared', `${who} declares no scope ${undeclared.map(([scope]) => scope).join(', ')}`, {
    details: undeclared.map(([scope, i]) => ({ pointer: `/scopes/${i}`, in: 'body' as const, code: 'not_declared', message: `${scope} is not among the scopes ${who} declares: ${declared.join(', ')}` })),
  });
}
