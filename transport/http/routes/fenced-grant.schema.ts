import * as z from 'zod';
import { GRANT_SCOPE, type LiveFencedGrant } from '../../../runtime/grant-fence.js';

/** One grant scope, as every fenced grant (Environment Backend, Plugin) and every declaration of them spells it. */
export const GrantScope = z.string().regex(GRANT_SCOPE);

/**
 * How many fenced grants of one kind a person may have issued: every grant is a row until it is swept a day after it
 * expired, so a page issuing in a loop would grow the store without end. Far above a page's need (a grant lives
 * minutes and serves every call to its endpoint meanwhile).
 */
export const GRANT_ISSUE_RATE = { perMinute: 120, burst: 60, by: 'subject' } as const;
export const GRANT_ISSUE_RATE_TEXT =
  ` At most ${GRANT_ISSUE_RATE.perMinute} a minute per person (bursts of ${GRANT_ISSUE_RATE.burst}): more answer 429 ` +
  '`rate_limited` with `Retry-After`.';

/** The scopes a Runtime asks a fenced grant for: 1–16, each once. Each route says which scopes it means. */
export const RequestedGrantScopes = z
  .array(GrantScope)
  .min(1)
  .max(16)
  .refine((s) => new Set(s).size === s.length, 'scopes must be unique');

/**
 * What an introspection of any fenced grant says when it holds (RFC 7662 style), beside what its kind adds: whose it
 * is, where, for what, under which Runtime fence and until when.
 */
export const activeFencedGrantFields = {
  active: z.literal(true),
  grantId: z.string(),
  actorId: z.string().describe("The person's pairwise actor id in the Environment."),
  environmentId: z.string(),
  origin: z.string(),
  environmentRoles: z.array(z.string()),
  scopes: z.array(z.string()),
  session: z.strictObject({ sessionId: z.string(), leaseVersion: z.number().int() }),
  expiresAt: z.iso.datetime(),
};

/** The body fields of `activeFencedGrantFields` for a grant that holds. */
export function activeFencedGrantBody(grant: LiveFencedGrant) {
  return {
    active: true as const,
    grantId: grant.grantId,
    actorId: grant.actorId,
    environmentId: grant.environmentId,
    origin: grant.origin,
    environmentRoles: [...grant.environmentRoles],
    scopes: [...grant.scopes],
    session: { sessionId: grant.sessionId, leaseVersion: grant.leaseVersion },
    expiresAt: new Date(grant.expiresAt).toISOString(),
  };
}
