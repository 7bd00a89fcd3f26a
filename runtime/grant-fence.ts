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
export async function grantFenceHolds(
  fence: GrantFence,
  sessions: RuntimeSessions,
  signInLive: (oauthGrantId: string) => Promise<boolean>,
): Promise<boolean> {
  if (!(await signInLive(fence.oauth_grant_id))) return false;
  const holder = await sessions.leaseHolder(fence.account_id);
  return holder !== null && holder.sessionId === fence.session_id && holder.leaseId === fence.lease_id && holder.version === fence.lease_version;
}
