import * as z from 'zod';
import type { Accounts } from '../../../identity/accounts.js';
import { idPattern } from '../../../identity/ids.js';
import { ADMIN_REASON, type PlatformAdmins } from '../../../identity/platform-admins.js';
import type { ReviewerAuthorities } from '../../../identity/reviewer-authorities.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs, type Principal } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';

export interface PlatformAdminDependencies {
  readonly accounts: Accounts;
  readonly admins: PlatformAdmins;
  readonly reviewers: ReviewerAuthorities;
}

const Reason = apiSchema('AdminReasonRequest', z.strictObject({ reason: z.string().min(ADMIN_REASON.min).max(ADMIN_REASON.max) }), 'An audited reason.');

const PlatformAdminGrantResponse = apiSchema(
  'PlatformAdminGrantResponse',
  z.strictObject({ userId: z.string(), platformAdmin: z.literal(true), changed: z.boolean().describe('False when the account already held platform admin.') }),
);

const ReviewerAuthorityChange = apiSchema(
  'ReviewerAuthorityChange',
  z.strictObject({ userId: z.string(), reviewer: z.boolean(), changed: z.boolean().describe('False when the account was already in that state.') }),
);

const ReviewerAuthorityList = apiSchema(
  'ReviewerAuthorityList',
  z.strictObject({
    authorities: z.array(z.strictObject({ userId: z.string(), handle: z.string(), grantedBy: z.string(), reason: z.string(), grantedAt: z.iso.datetime() })),
  }),
);

const UserParams = z.strictObject({ userId: z.string().regex(idPattern('acc')) });

type ManagementPrincipal = Extract<Principal, { credential: 'managementBearer' | 'developerSession' }>;

/** Platform administration of authority: platform admin itself and reviewer authority. */
export function platformAdminRoutes(deps: PlatformAdminDependencies): AnyRoute[] {
  const common = { tags: ['Management'], errorFormat: 'api', errors: [404] } as const;
  const requireAdmin = async (principal: Principal): Promise<ManagementPrincipal> => {
    const caller = principalAs(principal, 'managementBearer', 'developerSession');
    if (!(await deps.admins.isAdmin(caller.accountId))) {
      throw new HttpError(403, 'admin_required', 'only a platform administrator may do this', { family: 'management' });
    }
    return caller;
  };
  const requireUser = async (userId: string): Promise<void> => {
    if ((await deps.accounts.epochOf(userId)) === 0) throw new HttpError(404, 'user_not_found', 'no such account', { family: 'management' });
  };
  return [
    defineRoute({
      ...common,
      operationId: 'grantPlatformAdmin',
      method: 'put',
      path: '/v1/admin/users/{userId}/platform-admin',
      summary: 'Grant platform admin to an existing account',
      description:
        'CSRF-protected console session of an existing platform administrator only (`admin_required` otherwise). The ' +
        'grant and its `platform.admin.grant` audit event commit atomically; repeating it for an admin changes nothing.',
      credential: 'developerSession',
      csrf: true,
      params: UserParams,
      body: Reason,
      responses: { 200: { description: 'The account holds platform admin.', schema: PlatformAdminGrantResponse } },
      handler: async ({ principal, params, body }) => {
        const caller = await requireAdmin(principal);
        await requireUser(params.userId);
        const changed = await deps.admins.grant(params.userId, `account:${caller.accountId}`, body.reason);
        return { status: 200, body: { userId: params.userId, platformAdmin: true as const, changed } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'listReviewerAuthorities',
      method: 'get',
      path: '/v1/admin/reviewer-authorities',
      summary: 'Active reviewer authorities',
      credential: 'managementIdentity',
      responses: { 200: { description: 'Every account holding reviewer authority.', schema: ReviewerAuthorityList } },
      handler: async ({ principal }) => {
        await requireAdmin(principal);
        const authorities = await Promise.all(
          (await deps.reviewers.list()).map(async (a) => ({
            userId: a.accountId,
            handle: (await deps.accounts.account(a.accountId)).handle ?? '',
            grantedBy: a.grantedBy,
            reason: a.reason,
            grantedAt: new Date(a.grantedAt).toISOString(),
          })),
        );
        return { status: 200, body: { authorities } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'grantReviewerAuthority',
      method: 'put',
      path: '/v1/admin/reviewer-authorities/{userId}',
      summary: 'Grant reviewer authority',
      description:
        'Platform administrators only; an administrator may grant it to themselves. The grant and its ' +
        '`reviewer.authority.grant` audit event commit atomically. Cookie callers send no `X-CSRF-Token`: the spec asks ' +
        'for CSRF only on the operations that say so, and this one does not (the console cookie is SameSite=Strict).',
      credential: 'managementIdentity',
      params: UserParams,
      body: Reason,
      responses: { 200: { description: 'The account holds reviewer authority.', schema: ReviewerAuthorityChange } },
      handler: async ({ principal, params, body }) => {
        const caller = await requireAdmin(principal);
        await requireUser(params.userId);
        const changed = await deps.reviewers.grant(params.userId, `account:${caller.accountId}`, body.reason);
        return { status: 200, body: { userId: params.userId, reviewer: true, changed } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'revokeReviewerAuthority',
      method: 'delete',
      path: '/v1/admin/reviewer-authorities/{userId}',
      summary: 'Revoke reviewer authority',
      description:
        'Platform administrators only. Also ends every review host capability of the account. Commits with its ' +
        '`reviewer.authority.revoke` audit event. No `X-CSRF-Token` for cookie callers, as for the grant.',
      credential: 'managementIdentity',
      params: UserParams,
      body: Reason,
      responses: { 200: { description: 'The account holds no reviewer authority.', schema: ReviewerAuthorityChange } },
      handler: async ({ principal, params, body }) => {
        const caller = await requireAdmin(principal);
        const changed = await deps.reviewers.revoke(params.userId, `account:${caller.accountId}`, body.reason);
        return { status: 200, body: { userId: params.userId, reviewer: false, changed } };
      },
    }),
  ];
}
