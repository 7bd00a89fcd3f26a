import * as z from 'zod';
import { ENVIRONMENT_ID } from '../../../identity/environments.js';
import { idPattern } from '../../../identity/ids.js';
import { BACKEND_GRANT_TTL_S, backendEndpoint, type BackendGrants } from '../../../runtime/backend-grants.js';
import type { RuntimeSessions } from '../../../runtime/runtime-sessions.js';
import { operatorOf } from '../../ops/registry-admin.routes.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { activeFencedGrantBody, activeFencedGrantFields, GRANT_ISSUE_RATE, GRANT_ISSUE_RATE_TEXT, GrantScope, RequestedGrantScopes } from './fenced-grant.schema.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

const ContextValue = z.union([z.string().max(256), z.number(), z.boolean()]);

const BackendGrantRequest = apiSchema(
  'EnvironmentBackendGrantRequest',
  z.strictObject({
    scopes: RequestedGrantScopes.describe('Scopes the Environment declared for its backend.'),
    context: z
      .record(z.string().regex(/^[A-Za-z][A-Za-z0-9_.-]{0,63}$/), ContextValue)
      .refine((c) => Object.keys(c).length <= 16, 'at most 16 context members')
      .optional()
      .describe('Opaque to the registry and handed to the backend as given: at most 16 members, strings up to 256 characters.'),
  }),
  'Only declared scopes and context: the registry derives actor, origin, Environment roles, endpoint and the Runtime fence.',
);

const BackendGrantResponse = apiSchema(
  'EnvironmentBackendGrant',
  z.strictObject({
    grantId: z.string().regex(idPattern('ebgr')),
    grant: z.string().describe('Hand this to the Environment backend; it introspects it. Shown once.'),
    tokenType: z.literal('Bearer'),
    endpoint: z.string().describe('The one endpoint the grant is for: the backend the Environment declared.'),
    scopes: z.array(z.string()),
    expiresAt: z.iso.datetime(),
    expiresIn: z.number().int().positive(),
  }),
);

const IntrospectionRequest = apiSchema(
  'EnvironmentBackendGrantIntrospectionRequest',
  z.strictObject({
    grant: z.string().min(1).max(256),
    endpoint: z.string().max(2048).describe('The exact endpoint of the backend asking: a grant for another endpoint is inactive.'),
  }),
);

const IntrospectionResponse = apiSchema(
  'EnvironmentBackendGrantIntrospection',
  z.union([
    z.strictObject({ active: z.literal(false) }),
    z.strictObject({ ...activeFencedGrantFields, context: z.record(z.string(), ContextValue), endpoint: z.string() }),
  ]),
  'RFC 7662 style: `active: false` says nothing more, whatever the reason.',
);

const DeclareBackendRequest = apiSchema(
  'OpsDeclareEnvironmentBackendRequest',
  z.strictObject({
    endpoint: z.string().max(2048),
    scopes: z.array(GrantScope).min(1).max(64),
  }),
);

const DeclaredBackend = apiSchema('OpsEnvironmentBackend', z.strictObject({ environmentId: z.string(), endpoint: z.string(), scopes: z.array(z.string()) }));

export function environmentBackendRoutes(deps: { grants: BackendGrants; sessions: RuntimeSessions }): AnyRoute[] {
  const common = { tags: ['Runtime'], errorFormat: 'api', errors: PROBLEM_TABLE_STATUSES } as const;
  return [
    defineRoute({
      ...common,
      operationId: 'issueEnvironmentBackendGrant',
      method: 'post',
      path: '/v1/runtime/environment-backend/grants',
      summary: 'Issue an Environment Backend Grant',
      description:
        `Active sessions only (lease-fenced). Lives ${BACKEND_GRANT_TTL_S / 60} minutes and is bound to the one endpoint ` +
        'the Environment declared. Scopes outside the declaration: 422 `scope_not_declared`; an Environment without a ' +
        'declared backend: 409 `environment_backend_not_declared`.' +
        GRANT_ISSUE_RATE_TEXT,
      credential: 'runtimeActive',
      cors: true,
      rateLimit: GRANT_ISSUE_RATE,
      body: BackendGrantRequest,
      maxBodyBytes: 8 * 1024,
      responses: { 201: { description: 'Issued.', schema: BackendGrantResponse } },
      handler: async ({ principal, body }) => {
        const { caller, sessionId, lease } = principalAs(principal, 'runtimeActive');
        const { environmentRoles } = await deps.sessions.roles(caller);
        const issued = await deps.grants.issue(caller, { sessionId, leaseId: lease.id, leaseVersion: lease.version }, { scopes: body.scopes, context: body.context ?? {} }, environmentRoles);
        return {
          status: 201,
          body: {
            grantId: issued.grantId,
            grant: issued.token,
            tokenType: 'Bearer' as const,
            endpoint: issued.endpoint,
            scopes: [...issued.scopes],
            expiresAt: new Date(issued.expiresAt).toISOString(),
            expiresIn: BACKEND_GRANT_TTL_S,
          },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'revokeEnvironmentBackendGrant',
      method: 'delete',
      path: '/v1/runtime/environment-backend/grants/{grantId}',
      summary: 'Revoke an Environment Backend Grant of this session',
      description: 'Open to the session in any live state; 204 whether the grant was live or had already ended. A grant is forgotten a day after it expired (revoked or not): it is then 404, as a grant never held.',
      credential: 'runtimeSession',
      cors: true,
      params: z.strictObject({ grantId: z.string().regex(idPattern('ebgr')) }),
      responses: { 204: { description: 'Revoked, or already ended.' } },
      handler: async ({ principal, params }) => {
        const { caller, sessionId } = principalAs(principal, 'runtimeSession');
        if (!(await deps.grants.revoke(caller, sessionId, params.grantId))) {
          throw new HttpError(404, 'backend_grant_not_found', 'this session holds no such grant', { family: 'runtime' });
        }
        return { status: 204, body: undefined };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'introspectEnvironmentBackendGrant',
      method: 'post',
      path: '/v1/runtime/environment-backend/grants/introspect',
      summary: 'Introspect an Environment Backend Grant (for the backend)',
      description:
        'The backend names its own exact endpoint beside the grant. Answers `active: false` (and nothing else) for an ' +
        'unknown, expired or revoked grant (a grant also ends when its Environment declares another endpoint or ' +
        'withdraws one of its scopes), one for another endpoint, one whose sign-in ended (browser logout, ' +
        'revocation, account epoch), and one whose Runtime no longer holds the lease it was issued under ' +
        '(superseded, released, lapsed). Grants are 256-bit random, so guessing is hopeless; the call is still rate ' +
        'limited per client address.',
      credential: 'none',
      rateLimit: { perMinute: 6_000, burst: 600, by: 'address' },
      body: IntrospectionRequest,
      responses: { 200: { description: 'Whether the grant holds now.', schema: IntrospectionResponse } },
      handler: async ({ body }) => {
        const result = await deps.grants.introspect(body.grant, body.endpoint);
        if (!result.active) return { status: 200, body: { active: false as const } };
        return { status: 200, body: { ...activeFencedGrantBody(result), context: { ...result.context }, endpoint: result.endpoint } };
      },
    }),
  ];
}

/** The operators declare an Environment's backend: its one endpoint and the scopes grants for it may carry. */
export function environmentBackendOpsRoutes(deps: { grants: BackendGrants; environmentExists: (id: string) => Promise<boolean> }): AnyRoute[] {
  return [
    defineRoute({
      tags: ['Operations'],
      credential: 'operator',
      errorFormat: 'api',
      operationId: 'opsDeclareEnvironmentBackend',
      method: 'put',
      path: '/registry/environments/{environmentId}/backend',
      summary: "Declare an Environment's backend",
      params: z.strictObject({ environmentId: z.string().regex(ENVIRONMENT_ID) }),
      body: DeclareBackendRequest,
      errors: [404],
      description: 'Live grants for another endpoint, or holding a scope this declaration leaves out, are revoked with it.',
      responses: { 200: { description: 'Declared (audited as environment.backend.declare).', schema: DeclaredBackend } },
      handler: async ({ params, body, headers }) => {
        const actor = operatorOf(headers);
        if (!(await deps.environmentExists(params.environmentId))) {
          throw new HttpError(404, 'environment_not_found', `no Environment ${params.environmentId}`, { family: 'catalog' });
        }
        const endpoint = backendEndpoint(body.endpoint);
        if (!endpoint) {
          const message = 'endpoint must be an absolute https URL (http only on loopback) without credentials or fragment';
          throw new HttpError(400, 'validation_failed', message, { details: [{ pointer: '/endpoint', in: 'body', code: 'invalid', message }] });
        }
        const declared = await deps.grants.declare({ environmentId: params.environmentId, endpoint, scopes: [...new Set(body.scopes)] }, actor);
        return { status: 200, body: { environmentId: declared.environmentId, endpoint: declared.endpoint, scopes: [...declared.scopes] } };
      },
    }),
  ];
}
