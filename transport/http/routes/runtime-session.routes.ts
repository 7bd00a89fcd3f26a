import * as z from 'zod';
import { idPattern } from '../../../identity/ids.js';
import { CONTROL_TOKEN_TTL_S, type ControlTokens } from '../../../runtime/control-tokens.js';
import type { RuntimeSessions, RuntimeSessionState } from '../../../runtime/runtime-sessions.js';
import { CONTROL_SOCKET_PATH } from '../../../runtime/runtime-sockets.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs, type RuntimeCaller } from '../credentials.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

const RuntimeRoleEntry = apiSchema(
  'RuntimeRoleCatalogEntry',
  z.strictObject({
    key: z.string().describe('Role key; `admin` is the derived role of the Environment owner.'),
    scope: z.enum(['all', 'scoped']).describe('`all`: every Environment of the Project; `scoped`: this Environment only.'),
    derived: z.boolean().describe('True for roles the registry derives (the owner\'s `admin`), false for platform-managed definitions.'),
  }),
);

const RuntimeLeaseView = apiSchema(
  'RuntimeLease',
  z.strictObject({
    leaseId: z.string().regex(idPattern('lse')).describe('Send as `X-Platform-Runtime-Lease`.'),
    leaseVersion: z.number().int().positive().describe('Send as `X-Platform-Runtime-Lease-Version`. Grows with every change of holder, never goes back.'),
    expiresAt: z.iso.datetime().describe('When the lease lapses unless renewed (an open runtime WebSocket or a fenced call renews it).'),
  }),
);

const RuntimeSessionResponse = apiSchema(
  'RuntimeSessionResponse',
  z.strictObject({
    sessionId: z.string().regex(idPattern('rts')).describe('Send as `X-Platform-Runtime-Session`.'),
    status: z.enum(['standby', 'active', 'superseded', 'released', 'revoked']),
    environmentId: z.string(),
    origin: z.string().describe('The origin the session is bound to.'),
    actorId: z.string().describe("The person's pairwise actor id in this Environment."),
    createdAt: z.iso.datetime(),
    lease: RuntimeLeaseView.nullable().describe('The lease, while this session holds it.'),
    environmentRoles: z.array(z.string()).describe('Starts with `admin` when the caller owns the Environment; then platform-managed role keys assigned to the caller here.'),
    environmentRoleCatalog: z.array(RuntimeRoleEntry).describe('Every role existing in the Environment.'),
  }),
  'A Runtime session: one Environment page of one person, bound to its origin and Environment.',
);

const ControlTokenResponse = apiSchema(
  'RuntimeControlTokenResponse',
  z.strictObject({
    controlToken: z.string().describe('Read-only credential of the control channel; carries no lease claims.'),
    tokenType: z.literal('Bearer'),
    expiresAt: z.iso.datetime(),
    expiresIn: z.number().int().positive().describe('Seconds.'),
    channel: z.string().describe('Path of the control channel WebSocket. Offer the subprotocols `registry.v1.json` and `registry.bearer.<controlToken>`.'),
  }),
);

/**
 * The Runtime session lifecycle. Runtime authorization, fencing and coordination refusals are Problems: token
 * (`runtime_token_invalid`, `runtime_authorization_expired`, 403 `insufficient_scope` for a sign-in granted `openid`
 * without `runtime`), origin (`runtime_origin_required`,
 * `runtime_origin_mismatch`), session (`runtime_session_not_found`, `runtime_session_ended`), quotas (429
 * `runtime_eviction_quota_exceeded`, `runtime_session_quota_exceeded`), coordination (503 `runtime_coordination_unavailable`). These routes are not among
 * the spec's first tables, so a malformed request is the nested ApiError of general validation.
 */
/** The limits these operations describe, as this server applies them (its configuration), not the defaults. */
export interface RuntimeSessionLimits {
  readonly evictionsPerMinute: number;
  readonly sessionsPerEnvironment: number;
  readonly sessionIdleSeconds: number;
  readonly leaseTtlSeconds: number;
  /** 0: ended sessions are kept for good. */
  readonly endedRetentionDays: number;
}

export function runtimeSessionRoutes(deps: { sessions: RuntimeSessions; controlTokens: ControlTokens; asyncApi: () => string; limits: RuntimeSessionLimits }): AnyRoute[] {
  const { limits } = deps;
  const kept =
    limits.endedRetentionDays === 0
      ? 'for good (`ACTOR_ENDED_RETENTION_DAYS` is 0)'
      : `for ${limits.endedRetentionDays} day${limits.endedRetentionDays === 1 ? '' : 's'} (\`ACTOR_ENDED_RETENTION_DAYS\`)`;
  const common = { tags: ['Runtime'], errorFormat: 'api', errors: PROBLEM_TABLE_STATUSES } as const;
  const view = async (caller: RuntimeCaller, state: RuntimeSessionState) => {
    const { context, status, lease } = state;
    return {
      sessionId: context.sessionId,
      status,
      environmentId: context.environmentId,
      origin: context.origin,
      actorId: context.actorId,
      createdAt: new Date(context.createdAt).toISOString(),
      lease: lease ? { leaseId: lease.leaseId, leaseVersion: lease.version, expiresAt: new Date(lease.expiresAt).toISOString() } : null,
      ...(await deps.sessions.roles(caller)),
    };
  };
  const responses = { 200: { description: 'The session.', schema: RuntimeSessionResponse } } as const;
  return [
    defineRoute({
      tags: ['Runtime'],
      errorFormat: 'api',
      operationId: 'getRuntimeAsyncApi',
      method: 'get',
      path: '/v1/runtime/asyncapi.json',
      summary: 'AsyncAPI 3.0.0 description of the runtime WebSocket and the control channel',
      credential: 'none',
      responses: { 200: { description: 'The AsyncAPI document.', text: { mediaType: 'application/vnd.aai.asyncapi+json' } } },
      handler: async () => ({ status: 200, body: deps.asyncApi() }),
    }),
    defineRoute({
      ...common,
      operationId: 'createRuntimeSession',
      method: 'post',
      path: '/v1/runtime/session',
      summary: 'Create a standby Runtime session',
      description:
        'Binds the new session to the request\'s `Origin` (the Environment\'s registered origin, or ' +
        '`platform-env://{environmentId}` in the desktop shell) and to the Environment whose client issued the token. ' +
        'The session starts on standby: it holds no lease until activated.\n\n' +
        `**Live sessions per person.** A person may hold at most ${limits.sessionsPerEnvironment} (\`RUNTIME_SESSIONS_PER_ENVIRONMENT\`) ` +
        'sessions that have not ended in one Environment (standby, active and superseded ones count; released and ' +
        'revoked ones do not). Over it: 429 `runtime_session_quota_exceeded` with `Retry-After` (seconds until the ' +
        'soonest idle session is released), decided in the person\'s lease actor so racing creations cannot pass ' +
        'together. Release sessions that are no longer needed.\n\n' +
        `**Creation rate.** Released sessions keep their records ${kept}, so ` +
        'creating is also limited per person (the account, across Environments): 60 a minute, in bursts of up to 60, ' +
        'per gateway node. Over it: 429 `rate_limited` with `Retry-After`, before anything is read or written.\n\n' +
        `**Retention.** An ended session (released, revoked, idled out) answers 409 \`runtime_session_ended\` ${kept}` +
        (limits.endedRetentionDays === 0
          ? '.\n\n'
          : ' after its end; then its records are removed and it answers 404 `runtime_session_not_found`, as an unknown session does.\n\n') +
        '**Idle release.** A session that does not hold the lease (standby, or superseded) is released by the platform ' +
        `${limits.sessionIdleSeconds} seconds (\`RUNTIME_SESSION_IDLE_SECONDS\`) after it was created or lost the lease, unless it is activated ` +
        'first (a durable deadline: restarts do not reset it). It then answers like a released session (409 ' +
        '`runtime_session_ended`; status `released`), and its control channel hears `session.activity` with reason ' +
        '`idle_expired`. An active session never idles out; when its lease lapses or is taken, its idle time starts.',
      credential: 'runtimeToken',
      cors: true,
      // The cap bounds live sessions, not records: creating and releasing in a loop would grow the store without end.
      rateLimit: { perMinute: 60, burst: 60, by: 'subject' },
      responses: { 201: { description: 'Created, on standby.', schema: RuntimeSessionResponse } },
      handler: async ({ principal }) => {
        const { caller } = principalAs(principal, 'runtimeToken');
        return { status: 201, body: await view(caller, await deps.sessions.create(caller)) };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'getRuntimeSession',
      method: 'get',
      path: '/v1/runtime/session',
      summary: 'Read the Runtime session',
      description:
        'An active session, with its Environment roles and the Environment\'s role catalog. No lease claims needed. ' +
        'The spec leaves a standby or superseded session one read, the control token, so any other state answers 409 ' +
        'with its code: `runtime_session_standby`, `runtime_session_superseded`, `runtime_session_ended` (released ' +
        'or revoked), which tells the page its state all the same.',
      credential: 'runtimeSession',
      cors: true,
      responses,
      handler: async ({ principal }) => {
        const { caller, sessionId } = principalAs(principal, 'runtimeSession');
        return { status: 200, body: await view(caller, await deps.sessions.activeSession(caller, sessionId)) };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'activateRuntimeSession',
      method: 'post',
      path: '/v1/runtime/session/activate',
      summary: "Activate: take the person's one fenced lease",
      description:
        'Accepts standby and superseded sessions (an active one gets its current lease back). Atomically evicts the ' +
        "person's other live Runtime, which becomes superseded; the lease version grows with every change of holder.\n\n" +
        '**Eviction quota.** Activations that evict are limited per person (the private principal: the account, not ' +
        `the pairwise id, so more Environments buy no more evictions): a bucket of ${limits.evictionsPerMinute} (\`RUNTIME_EVICTIONS_PER_MINUTE\`) ` +
        'refilled at that rate per minute. Over it, an activation that would evict answers 429 ' +
        '`runtime_eviction_quota_exceeded` with `Retry-After`, decided before the coordination store is touched. ' +
        'Activations that certainly evict nobody (the lease free or held by that session, and no other activation of ' +
        'the person under way) are never limited.\n\n' +
        `**Lease lifetime.** A lease lapses ${limits.leaseTtlSeconds} seconds (\`RUNTIME_LEASE_TTL_SECONDS\`) after it was last renewed. An open ` +
        'runtime WebSocket renews it, and so does any fenced call once a third of that time has passed. A lapsed lease ' +
        'frees the person\'s slot without anyone being evicted: the session returns to standby and its old fence ' +
        'answers `runtime_session_standby`.',
      credential: 'runtimeActivation',
      cors: true,
      responses: { 200: { description: 'Active, with its lease.', schema: RuntimeSessionResponse } },
      handler: async ({ principal }) => {
        const { caller, sessionId } = principalAs(principal, 'runtimeActivation');
        return { status: 200, body: await view(caller, await deps.sessions.activate(caller, sessionId)) };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'releaseRuntimeSession',
      method: 'post',
      path: '/v1/runtime/session/release',
      summary: 'Release the Runtime session',
      description:
        'Ends the session for good (status `released`); if it held the lease, the lease is freed and nobody is evicted. ' +
        'Releasing again answers the same until the session is retired (`ACTOR_ENDED_RETENTION_DAYS` after its end; ' +
        'then 404 `runtime_session_not_found`). A released session no longer counts against the live sessions a person ' +
        'may hold.',
      credential: 'runtimeSession',
      cors: true,
      responses,
      handler: async ({ principal }) => {
        const { caller, sessionId } = principalAs(principal, 'runtimeSession');
        return { status: 200, body: await view(caller, await deps.sessions.release(caller, sessionId)) };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'issueRuntimeControlToken',
      method: 'post',
      path: '/v1/runtime/control-token',
      summary: 'Issue a control token for the control channel',
      description:
        'The only read endpoint open to a standby or superseded session (active sessions may call it too). The token ' +
        'lives 5 minutes, is bound to this session and origin, carries no lease claims, and works only on the control ' +
        `channel WebSocket (\`${CONTROL_SOCKET_PATH}\`), which streams the session's activity and browser-wide sign-out ` +
        'and refuses every client message. No HTTP API and no runtime WebSocket accepts it.',
      credential: 'runtimeSession',
      cors: true,
      responses: { 200: { description: 'Issued.', schema: ControlTokenResponse } },
      handler: async ({ principal }) => {
        const { caller, sessionId } = principalAs(principal, 'runtimeSession');
        await deps.sessions.liveSession(caller, sessionId);
        const issued = await deps.controlTokens.issue(caller, sessionId);
        return {
          status: 200,
          body: {
            controlToken: issued.token,
            tokenType: 'Bearer' as const,
            expiresAt: new Date(issued.expiresAt).toISOString(),
            expiresIn: CONTROL_TOKEN_TTL_S,
            channel: CONTROL_SOCKET_PATH,
          },
        };
      },
    }),
  ];
}
