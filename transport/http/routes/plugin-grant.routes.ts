import * as z from 'zod';
import { idPattern } from '../../../identity/ids.js';
import { PLUGIN_ID } from '../../../plugins/plugin-catalog.js';
import { PLUGIN_GRANT_PERMISSION, PLUGIN_GRANT_TTL_S, type PluginGrants } from '../../../runtime/plugin-grants.js';
import type { RuntimeSessions } from '../../../runtime/runtime-sessions.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { activeFencedGrantBody, activeFencedGrantFields, GRANT_ISSUE_RATE, GRANT_ISSUE_RATE_TEXT, RequestedGrantScopes } from './fenced-grant.schema.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

const PluginGrantRequest = apiSchema(
  'PluginGrantRequest',
  z.strictObject({
    component: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/).describe('The backend component the grant is for (Media: `control`).'),
    scopes: RequestedGrantScopes.describe("Among the component's grant scopes (Media control: `media:connect`, `media:direct-call`, `media:join-space`, `media:request-speak`, `media:publish`)."),
    context: z
      .record(z.string(), z.unknown())
      .describe('Exactly what the component\'s context schema names (Media control: one property `scope`, 1–96 characters, `^[A-Za-z0-9][A-Za-z0-9:_-]{0,95}$`).'),
  }),
  'Only the component, scopes and context: the registry derives actor, origin, Environment roles and the Runtime fence.',
);

const PluginGrantResponse = apiSchema(
  'PluginGrant',
  z.strictObject({
    grantId: z.string().regex(idPattern('pgr')),
    grant: z.string().describe('Hand this to the component (Media: the control-plane WebSocket subprotocol `registry.bearer.<grant>`). Shown once.'),
    tokenType: z.literal('Bearer'),
    pluginId: z.string(),
    component: z.string(),
    scopes: z.array(z.string()),
    context: z.record(z.string(), z.string()),
    expiresAt: z.iso.datetime(),
    expiresIn: z.number().int().positive(),
  }),
);

const IntrospectionRequest = apiSchema('PluginGrantIntrospectionRequest', z.strictObject({ grant: z.string().min(1).max(256) }));

const IntrospectionResponse = apiSchema(
  'PluginGrantIntrospection',
  z.union([
    z.strictObject({ active: z.literal(false) }),
    z.strictObject({ ...activeFencedGrantFields, pluginId: z.string(), component: z.string(), context: z.record(z.string(), z.string()) }),
  ]),
  'RFC 7662 style: `active: false` says nothing more, whatever the reason.',
);

const PluginParams = z.strictObject({ pluginId: z.string().regex(PLUGIN_ID) });

export function pluginGrantRoutes(deps: { grants: PluginGrants; sessions: RuntimeSessions }): AnyRoute[] {
  const common = { tags: ['Runtime'], errorFormat: 'api', errors: PROBLEM_TABLE_STATUSES } as const;
  return [
    defineRoute({
      ...common,
      operationId: 'issuePluginGrant',
      method: 'post',
      path: '/v1/runtime/plugins/{pluginId}/grants',
      summary: "Issue a Plugin Grant for one of the Plugin's backend components",
      description:
        `Active sessions only (lease-fenced), for a Plugin the Environment installed whose release requests the platform permission ` +
        `\`${PLUGIN_GRANT_PERMISSION}\`. Lives ${PLUGIN_GRANT_TTL_S / 60} minutes; supersession, release, lapse of the lease and ` +
        'browser logout end it at once (every use checks its fence). Not installed: 404 `plugin_not_installed`; permission not ' +
        'requested: 403 `plugin_permission_not_requested`; unknown component, scope or context: 422 `plugin_component_unknown`, ' +
        '`scope_not_declared`, `grant_context_invalid` with pointers.' +
        GRANT_ISSUE_RATE_TEXT,
      credential: 'runtimeActive',
      cors: true,
      rateLimit: GRANT_ISSUE_RATE,
      params: PluginParams,
      body: PluginGrantRequest,
      maxBodyBytes: 4 * 1024,
      responses: { 201: { description: 'Issued.', schema: PluginGrantResponse } },
      handler: async ({ principal, params, body }) => {
        const { caller, sessionId, lease } = principalAs(principal, 'runtimeActive');
        const { environmentRoles } = await deps.sessions.roles(caller);
        const issued = await deps.grants.issue(caller, { sessionId, leaseId: lease.id, leaseVersion: lease.version }, params.pluginId, body, environmentRoles);
        return {
          status: 201,
          body: {
            grantId: issued.grantId,
            grant: issued.token,
            tokenType: 'Bearer' as const,
            pluginId: params.pluginId,
            component: body.component,
            scopes: [...issued.scopes],
            context: { ...issued.context },
            expiresAt: new Date(issued.expiresAt).toISOString(),
            expiresIn: PLUGIN_GRANT_TTL_S,
          },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'introspectPluginGrant',
      method: 'post',
      path: '/v1/runtime/plugins/{pluginId}/grants/introspect',
      summary: "Introspect a Plugin Grant (for a backend that received one, e.g. the Media publisher-authority callback's `grant`)",
      description:
        'Answers `active: false` (and nothing else) for an unknown, expired or revoked grant, one for another Plugin, one whose ' +
        'sign-in ended and one whose Runtime no longer holds the lease it was issued under. Rate limited per client address.',
      credential: 'none',
      rateLimit: { perMinute: 6_000, burst: 600, by: 'address' },
      params: PluginParams,
      body: IntrospectionRequest,
      responses: { 200: { description: 'Whether the grant holds now.', schema: IntrospectionResponse } },
      handler: async ({ params, body }) => {
        const grant = await deps.grants.verify(body.grant, params.pluginId);
        if (!grant) return { status: 200, body: { active: false as const } };
        return {
          status: 200,
          body: { ...activeFencedGrantBody(grant), pluginId: grant.pluginId, component: grant.component, context: { ...grant.context } },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'revokePluginGrant',
      method: 'delete',
      path: '/v1/runtime/plugins/{pluginId}/grants/{grantId}',
      summary: 'Revoke a Plugin Grant of this session',
      description: 'Open to the session in any live state; 204 whether the grant was live or had already ended. Connections made with it close. A grant is forgotten a day after it expired (revoked or not): it is then 404, as a grant never held.',
      credential: 'runtimeSession',
      cors: true,
      params: z.strictObject({ pluginId: z.string().regex(PLUGIN_ID), grantId: z.string().regex(idPattern('pgr')) }),
      responses: { 204: { description: 'Revoked, or already ended.' } },
      handler: async ({ principal, params }) => {
        const { caller, sessionId } = principalAs(principal, 'runtimeSession');
        if (!(await deps.grants.revoke(caller, sessionId, params.pluginId, params.grantId))) {
          throw new HttpError(404, 'plugin_grant_not_found', 'this session holds no such grant', { family: 'runtime' });
        }
        return { status: 204, body: undefined };
      },
    }),
  ];
}
