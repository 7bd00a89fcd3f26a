import * as z from 'zod';
import type { BrowserSessions } from '../../../identity/browser-sessions.js';
import type { EnvironmentDirectory } from '../../../identity/environments.js';
import { LIVE_SESSION_CAPS } from '../../../identity/live-session-caps.js';
import { idPattern } from '../../../identity/ids.js';
import type { OAuthGrants } from '../../../identity/oauth-grants.js';
import type { PlatformAdmins } from '../../../identity/platform-admins.js';
import type { ReviewerAuthorities } from '../../../identity/reviewer-authorities.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

export interface AccountSessionDependencies {
  readonly sessions: BrowserSessions;
  readonly directory: EnvironmentDirectory;
  readonly grants: OAuthGrants;
  readonly admins: PlatformAdmins;
  readonly reviewers: ReviewerAuthorities;
}

const EnvironmentActor = apiSchema(
  'EnvironmentActor',
  z.strictObject({
    environmentId: z.string(),
    actorId: z
      .string()
      .regex(idPattern('act'))
      .describe('Who the account is inside this Environment: stable for the pair, unlinkable across Environments; also the `sub` of ID tokens issued to the Environment.'),
  }),
);

const CreateDesktopManagementSessionRequest = apiSchema(
  'CreateDesktopManagementSessionRequest',
  z.strictObject({
    label: z.string().min(1).max(64).optional().describe('Shown in audit and listings. Scopes cannot be asked for: the server derives them.'),
  }),
);

const DesktopManagementSessionResponse = apiSchema(
  'DesktopManagementSessionResponse',
  z.strictObject({
    sessionId: z.string().regex(idPattern('dms')),
    accessToken: z.string().describe('Management bearer (ES256 JWT, audience `registry-management`).'),
    tokenType: z.literal('Bearer'),
    scopes: z.array(z.string()).describe('`management`, plus `platform:admin` for a platform administrator and `reviewer:admin` for a holder of reviewer authority.'),
    expiresAt: z.iso.datetime(),
  }),
);

const RevokeDesktopManagementSessionResponse = apiSchema(
  'RevokeDesktopManagementSessionResponse',
  z.strictObject({ sessionId: z.string(), revoked: z.literal(true), revokedAt: z.iso.datetime() }),
);

const iso = (ms: number): string => new Date(ms).toISOString();

/** Device-plane operations that turn a device key into other sessions, and the account's pairwise identities. */
export function accountSessionRoutes(deps: AccountSessionDependencies): AnyRoute[] {
  const device = { tags: ['Devices'], errorFormat: 'problem', errors: PROBLEM_TABLE_STATUSES, credential: 'deviceAssertion' } as const;
  return [
    defineRoute({
      ...device,
      operationId: 'createPageSession',
      method: 'post',
      path: '/v1/account/page-session',
      summary: 'Turn the device key into a browser session for registry pages',
      description:
        'Sets the HttpOnly cookie `__Host-registry_page` (Secure, SameSite=Lax, 12 hours), and `__Host-registry_browser` ' +
        'naming the browser (planted, or renewed for 400 days; an id holding sessions of another account is not taken, and the browser ' +
        'is named afresh): browser SSO logout ends every session of that browser. The session ends ' +
        'early when the account epoch rises.\n\n' +
        `An account holds at most ${LIVE_SESSION_CAPS.page} live page sessions: a new one is never refused, and ends the account's ` +
        'oldest beyond that (as a logout would: its cookie and its unexchanged codes stop working), so a person is never locked ' +
        'out of signing in and one device cannot pile up live sessions.',
      responses: {
        204: {
          description: 'The page session cookie is set.',
          headers: { 'Set-Cookie': { description: 'The page session, and the browser cookie (planted or renewed).', schema: z.string() } },
        },
      },
      handler: async ({ principal, headers }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        // The epoch the device was seen active in, not a fresh read: a removal committing meanwhile ends this session.
        const { cookie, browserCookie } = await deps.sessions.create('page', {
          browserId: deps.sessions.browserOf(headers),
          accountId: caller.accountId,
          accountEpoch: caller.accountEpoch,
          deviceId: caller.deviceId,
        });
        return { status: 204, body: undefined, headers: { 'set-cookie': [cookie, browserCookie] } };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'getEnvironmentActor',
      method: 'get',
      path: '/v1/account/environments/{environmentId}/actor',
      summary: 'Who the account is inside one Environment',
      params: z.strictObject({ environmentId: z.string().max(64) }),
      responses: { 200: { description: 'The pairwise actor id.', schema: EnvironmentActor } },
      handler: async ({ principal, params }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        const environment = await deps.directory.environment(params.environmentId);
        if (!environment) throw new HttpError(404, 'environment_not_found', 'no such Environment', { family: 'catalog' });
        return { status: 200, body: { environmentId: environment.id, actorId: deps.directory.pairwiseActorId(caller.accountId, environment.id) } };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'createDesktopManagementSession',
      method: 'post',
      path: '/v1/account/desktop-management-sessions',
      summary: 'A management session for the Desktop Shell',
      description:
        'Under a body-bound device assertion. Scopes are derived by the server: `management`; `platform:admin` for a ' +
        'platform administrator; `reviewer:admin` (desktop review admission) for an account holding reviewer ' +
        'authority. A request naming scopes is refused (`validation_failed`). The bearer lasts one ' +
        'hour, is checked online against the session and the account epoch, and can be exchanged for a console session.\n\n' +
        `An account holds at most ${LIVE_SESSION_CAPS.desktop} live desktop management sessions of its current account epoch: ` +
        'past that, 429 `desktop_management_session_quota_exceeded` with `Retry-After` (seconds until the oldest ends; ' +
        'revoking one frees its place at once). Refused rather than ending the oldest: a running Shell holds each.',
      bodyBound: true,
      body: CreateDesktopManagementSessionRequest,
      responses: { 201: { description: 'The session and its bearer.', schema: DesktopManagementSessionResponse } },
      handler: async ({ principal }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        const [admin, reviewer] = await Promise.all([deps.admins.isAdmin(caller.accountId), deps.reviewers.holds(caller.accountId)]);
        const scopes = ['management', ...(admin ? ['platform:admin'] : []), ...(reviewer ? ['reviewer:admin'] : [])];
        // The epoch the device was seen active in (see createPageSession).
        const { grant, accessToken } = await deps.grants.createDesktopSession({ accountId: caller.accountId, accountEpoch: caller.accountEpoch, deviceId: caller.deviceId, scopes });
        return {
          status: 201,
          body: { sessionId: grant.id, accessToken, tokenType: 'Bearer' as const, scopes: [...grant.scopes], expiresAt: iso(grant.expiresAt) },
        };
      },
    }),
    defineRoute({
      ...device,
      operationId: 'revokeDesktopManagementSession',
      method: 'delete',
      path: '/v1/account/desktop-management-sessions/{sessionId}',
      summary: 'Revoke a desktop management session',
      description: 'Ends the bearer and every console session exchanged from it. Revoking a revoked session answers the same; another account’s session is 404.',
      params: z.strictObject({ sessionId: z.string().regex(idPattern('dms')) }),
      responses: { 200: { description: 'Revoked.', schema: RevokeDesktopManagementSessionResponse } },
      handler: async ({ principal, params }) => {
        const caller = principalAs(principal, 'deviceAssertion');
        const revoked = await deps.grants.revokeOwned(caller.accountId, params.sessionId, 'desktop', 'revoked_by_device');
        if (!revoked) throw new HttpError(404, 'management_session_not_found', 'no such desktop management session on this account', { family: 'account_policy' });
        return { status: 200, body: { sessionId: params.sessionId, revoked: true as const, revokedAt: iso(revoked.revokedAt) } };
      },
    }),
  ];
}
