import * as z from 'zod';
import type { Accounts } from '../../../identity/accounts.js';
import { idPattern } from '../../../identity/ids.js';
import { LIVE_SESSION_CAPS } from '../../../identity/live-session-caps.js';
import type { ReviewerAuthorities } from '../../../identity/reviewer-authorities.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

const IssueReviewHostCapabilityRequest = apiSchema(
  'IssueReviewHostCapabilityRequest',
  z.strictObject({}),
  'Empty: the capability is bound to the device that signs the (body-bound) assertion.',
);

const IssuedReviewHostCapability = apiSchema(
  'IssuedReviewHostCapability',
  z.strictObject({
    capabilityId: z.string().regex(idPattern('hcap')),
    capability: z.string().describe('Send as `Platform-Review-Capability`, always with this device\'s assertion. Shown once.'),
    deviceId: z.string(),
    expiresAt: z.iso.datetime(),
  }),
);

/** The review host's capabilities: issued to a reviewer's device, released with that device's proof. */
export function reviewHostRoutes(deps: { accounts: Accounts; reviewers: ReviewerAuthorities }): AnyRoute[] {
  const common = { tags: ['Devices'], errorFormat: 'problem', errors: PROBLEM_TABLE_STATUSES } as const;
  return [
    defineRoute({
      ...common,
      operationId: 'issueReviewHostCapability',
      method: 'post',
      path: '/v1/review/host-capabilities',
      summary: 'Issue a review host capability to this device',
      description:
        'Under a body-bound device assertion, for an account holding reviewer authority (granted by a platform ' +
        'administrator, revocable; `reviewer_authority_required` otherwise). Lives 15 minutes.\n\n' +
        `An account holds at most ${LIVE_SESSION_CAPS.reviewCapability} live capabilities of its enrolled devices (a removed ` +
        "device's no longer count: nobody can use or release them): past that, 429 " +
        '`review_host_capability_quota_exceeded` with `Retry-After` (seconds until the oldest ends; releasing one frees ' +
        'its place at once). Refused rather than ending the oldest: a running review host holds each.',
      credential: 'deviceAssertion',
      bodyBound: true,
      body: IssueReviewHostCapabilityRequest,
      responses: { 201: { description: 'Issued.', schema: IssuedReviewHostCapability } },
      handler: async ({ principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        const account = await deps.accounts.account(caller.accountId);
        const removed = Object.values(account.devices).filter((d) => d.status === 'removed').map((d) => d.id);
        // Checked and issued in one transaction (see issueCapability): a revocation racing it never leaves it live.
        const issued = await deps.reviewers.issueCapability(caller.accountId, caller.deviceId, removed);
        if (!issued) throw new HttpError(403, 'reviewer_authority_required', 'this account holds no reviewer authority', { family: 'account_policy' });
        return {
          status: 201,
          body: { capabilityId: issued.id, capability: issued.token, deviceId: caller.deviceId, expiresAt: new Date(issued.expiresAt).toISOString() },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'releaseReviewHostCapability',
      method: 'delete',
      path: '/v1/review/host-capabilities/{capabilityId}',
      summary: 'Release a review host capability',
      description:
        'Needs the body-bound device proof of the device it was issued to and the exact capability in ' +
        '`Platform-Review-Capability`; answers 204 whether it was live or already released, revoked or expired, also once ' +
        'the registry no longer holds it (a day after it ended): a capability of that form it does not know is answered ' +
        'alike, since releasing it changes and tells nothing.',
      credential: 'reviewHostCapability',
      bodyBound: true,
      params: z.strictObject({ capabilityId: z.string().regex(idPattern('hcap')) }),
      responses: { 204: { description: 'Released, or already ended.' } },
      handler: async ({ principal, params }) => {
        const caller = principalAs(principal, 'reviewHostCapability');
        // A capability the registry no longer holds names no id to compare: releasing it again changes nothing.
        if (caller.capabilityId !== null && caller.capabilityId !== params.capabilityId) {
          throw new HttpError(403, 'review_capability_mismatch', 'the capability sent is not the one named in the path', { family: 'account_policy' });
        }
        if (caller.capabilityLive && caller.capabilityId !== null) await deps.reviewers.release(caller.capabilityId);
        return { status: 204, body: undefined };
      },
    }),
  ];
}
