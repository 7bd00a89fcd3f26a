import * as z from 'zod';
import type { Accounts } from '../../../identity/accounts.js';
import { CONSOLE_COOKIE, PAGE_COOKIE, type BrowserSessions } from '../../../identity/browser-sessions.js';
import type { EnvironmentDirectory } from '../../../identity/environments.js';
import { LIVE_SESSION_CAPS } from '../../../identity/live-session-caps.js';
import { idPattern } from '../../../identity/ids.js';
import type { OAuthGrants } from '../../../identity/oauth-grants.js';
import type { PlatformAdmins } from '../../../identity/platform-admins.js';
import { apiSchema } from '../api-schemas.js';
import { clearCookie } from '../cookies.js';
import { principalAs, type IncomingRequest, type Principal } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

export interface ManagementSessionDependencies {
  readonly accounts: Accounts;
  readonly sessions: BrowserSessions;
  readonly directory: EnvironmentDirectory;
  readonly grants: OAuthGrants;
  readonly admins: PlatformAdmins;
  /** Resolves the management identity a request carries, if any, without refusing: for `GET /v1/auth/me`. */
  readonly identify: (request: IncomingRequest) => Promise<Principal | undefined>;
}

const AccountSummary = apiSchema(
  'AccountSummary',
  z.strictObject({ handle: z.string(), platformAdmin: z.boolean() }),
  "The caller's own account as management sees it; never the raw account subject.",
);

const ConsoleAuthResponse = apiSchema(
  'ConsoleAuthResponse',
  z.strictObject({
    account: AccountSummary,
    csrfToken: z.string().describe('Send as `X-CSRF-Token` on operations that need CSRF while using the console cookie.'),
    expiresAt: z.iso.datetime(),
  }),
);

const MeResponse = apiSchema(
  'MeResponse',
  z.strictObject({
    authenticated: z.boolean(),
    credential: z.enum(['developerSession', 'managementBearer']).optional(),
    account: AccountSummary.optional(),
  }),
);

const OkResponse = apiSchema('OkResponse', z.strictObject({ ok: z.literal(true) }));

const ManagementSessionList = apiSchema(
  'ManagementSessionList',
  z.strictObject({
    sessions: z.array(
      z.strictObject({
        sessionId: z.string().regex(idPattern('grt')),
        clientName: z.string(),
        createdAt: z.iso.datetime(),
        lastUsedAt: z.iso.datetime().describe('Last sign-in or refresh.'),
        expiresAt: z.iso.datetime(),
        current: z.boolean().describe('The session the caller is using.'),
      }),
    ),
  }),
  "The caller's live CLI sign-ins (OAuth grants). Never tokens, codes or raw subjects.",
);

const RevokeManagementSessionResponse = apiSchema(
  'RevokeManagementSessionResponse',
  z.strictObject({ sessionId: z.string(), revoked: z.literal(true), revokedAt: z.iso.datetime() }),
);

const iso = (ms: number): string => new Date(ms).toISOString();

export function managementSessionRoutes(deps: ManagementSessionDependencies): AnyRoute[] {
  const problem = { tags: ['Management'], errorFormat: 'problem', errors: PROBLEM_TABLE_STATUSES } as const;
  const summary = async (accountId: string) => {
    const [account, platformAdmin] = await Promise.all([deps.accounts.account(accountId), deps.admins.isAdmin(accountId)]);
    return { handle: account.handle ?? '', platformAdmin };
  };
  return [
    defineRoute({
      ...problem,
      operationId: 'createConsoleSession',
      method: 'post',
      path: '/v1/auth/console-session',
      summary: 'Exchange a management bearer for a browser developer session',
      description:
        'Sets the HttpOnly cookie `__Host-registry_console` (Secure, SameSite=Strict) for at most 8 hours and never ' +
        'beyond the management session it came from, which must stay live. Returns the CSRF token that cookie callers ' +
        'send as `X-CSRF-Token`.\n\n' +
        `An account holds at most ${LIVE_SESSION_CAPS.console} live console sessions: a new one is never refused, and ends the ` +
        "account's oldest beyond that (its cookie and CSRF token stop working; the management session it came from stays).",
      credential: 'managementBearer',
      responses: {
        200: {
          description: 'The console session cookie is set.',
          schema: ConsoleAuthResponse,
          headers: { 'Set-Cookie': { description: 'The console session, and the browser cookie (planted or renewed).', schema: z.string() } },
        },
      },
      handler: async ({ principal, headers }) => {
        const caller = principalAs(principal, 'managementBearer', 'developerSession');
        const grant = await deps.grants.live(caller.grantId);
        if (!grant) throw new HttpError(401, 'access_token_revoked', 'the session behind this token was revoked or has ended', { family: 'management' });
        const { session, cookie, browserCookie } = await deps.sessions.create('console', {
          browserId: deps.sessions.browserOf(headers),
          accountId: caller.accountId,
          accountEpoch: grant.accountEpoch,
          grantId: grant.id,
          grantScopes: grant.scopes,
          notAfter: grant.expiresAt,
        });
        return {
          status: 200,
          body: { account: await summary(caller.accountId), csrfToken: deps.sessions.csrfToken(session.id), expiresAt: iso(session.expiresAt) },
          headers: { 'set-cookie': [cookie, browserCookie] },
        };
      },
    }),
    defineRoute({
      ...problem,
      operationId: 'getMe',
      method: 'get',
      path: '/v1/auth/me',
      summary: 'Who the caller is',
      description: 'No credential is required: a missing, expired or revoked console cookie or management bearer answers `authenticated: false`.',
      credential: 'none',
      responses: { 200: { description: 'The caller.', schema: MeResponse } },
      handler: async ({ headers, remoteAddress }) => {
        const principal = await deps.identify({ method: 'GET', path: '/v1/auth/me', query: '', headers, remoteAddress, body: Buffer.alloc(0) });
        if (!principal || (principal.credential !== 'developerSession' && principal.credential !== 'managementBearer')) {
          return { status: 200, body: { authenticated: false } };
        }
        return { status: 200, body: { authenticated: true, credential: principal.credential, account: await summary(principal.accountId) } };
      },
    }),
    defineRoute({
      ...problem,
      operationId: 'logout',
      method: 'post',
      path: '/v1/auth/logout',
      summary: 'Browser SSO logout',
      description:
        'Ends every console and page session of this browser (named by its `__Host-registry_browser` cookie, and by the ' +
        'console and page sessions it sends) and the ' +
        'Environment grants authorized through it, and clears the cookies. CLI and desktop management sessions are ' +
        'separate credentials and stay. The console cookie is all it needs: the spec asks for CSRF only on the ' +
        'operations that say so, and this one does not (the cookie is SameSite=Strict, so a cross-site form cannot ' +
        'send it).',
      credential: 'developerSession',
      responses: {
        200: {
          description: 'Signed out in this browser.',
          schema: OkResponse,
          headers: { 'Set-Cookie': { description: 'Clears the console and page session cookies.', schema: z.string() } },
        },
      },
      handler: async ({ principal, headers }) => {
        const caller = principalAs(principal, 'managementBearer', 'developerSession');
        // One after another, each browser's sessions and grants ending atomically (see logoutBrowser).
        for (const browserId of await deps.sessions.browsersOfLogout(headers, caller.browserId!, caller.accountId)) {
          await deps.sessions.logoutBrowser(browserId, 'browser_logout');
        }
        return { status: 200, body: { ok: true as const }, headers: { 'set-cookie': [clearCookie(CONSOLE_COOKIE), clearCookie(PAGE_COOKIE)] } };
      },
    }),
    defineRoute({
      operationId: 'listManagementSessions',
      method: 'get',
      path: '/v1/auth/management-sessions',
      summary: "The caller's CLI sign-ins",
      tags: ['Management'],
      errorFormat: 'api',
      credential: 'managementIdentity',
      responses: { 200: { description: 'Live CLI OAuth grants.', schema: ManagementSessionList } },
      handler: async ({ principal }) => {
        const caller = principalAs(principal, 'managementBearer', 'developerSession');
        const grants = await deps.grants.list(caller.accountId, 'cli', await deps.accounts.epochOf(caller.accountId));
        const sessions = await Promise.all(
          grants.map(async (g) => ({
            sessionId: g.id,
            clientName: (g.clientId ? (await deps.directory.client(g.clientId))?.name : undefined) ?? 'unknown client',
            createdAt: iso(g.createdAt),
            lastUsedAt: iso(g.lastUsedAt),
            expiresAt: iso(g.expiresAt),
            current: g.id === caller.grantId,
          })),
        );
        return { status: 200, body: { sessions } };
      },
    }),
    defineRoute({
      operationId: 'revokeManagementSession',
      method: 'delete',
      path: '/v1/auth/management-sessions/{sessionId}',
      summary: 'Revoke one CLI sign-in with its access and refresh material',
      description: 'Cookie callers send `X-CSRF-Token`. Another account’s session is indistinguishable from a missing one (404).',
      tags: ['Management'],
      errorFormat: 'api',
      credential: 'managementIdentity',
      csrf: true,
      params: z.strictObject({ sessionId: z.string().regex(idPattern('grt')) }),
      responses: { 200: { description: 'Revoked.', schema: RevokeManagementSessionResponse } },
      errors: [404],
      handler: async ({ principal, params }) => {
        const caller = principalAs(principal, 'managementBearer', 'developerSession');
        const revoked = await deps.grants.revokeOwned(caller.accountId, params.sessionId, 'cli', 'revoked_by_owner');
        if (!revoked) throw new HttpError(404, 'management_session_not_found', 'no such CLI session on this account', { family: 'management' });
        return { status: 200, body: { sessionId: params.sessionId, revoked: true as const, revokedAt: iso(revoked.revokedAt) } };
      },
    }),
  ];
}
