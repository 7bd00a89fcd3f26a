import { runtimeKinds, type LeaseEnded } from '../actors/runtime.actors.js';
import type { SessionIdleExpired, SessionLeaseCheck } from '../machines/runtime-session/runtime-session.machine.js';
import { identityServices } from '../identity/identity.feature.js';
import { pluginInstallations } from '../plugins/plugins.feature.js';
import type { ServerParts, ServerServices } from '../server/server.js';
import { scheduleSweep } from '../storage/sweep.js';
import { LEASE_VERSION, type CredentialVerifier } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import { environmentBackendOpsRoutes, environmentBackendRoutes } from '../transport/http/routes/environment-backend.routes.js';
import { pluginGrantRoutes } from '../transport/http/routes/plugin-grant.routes.js';
import { runtimeSessionRoutes } from '../transport/http/routes/runtime-session.routes.js';
import { BackendGrants } from './backend-grants.js';
import { ControlTokens } from './control-tokens.js';
import { EvictionQuota } from './eviction-quota.js';
import { sweepEndedRuntimeGrants } from './grant-sweep.js';
import { PluginGrants } from './plugin-grants.js';
import { RuntimeActivity } from './runtime-activity.js';
import { RuntimeSessions } from './runtime-sessions.js';
import { runtimeSockets } from './runtime-sockets.js';
import { buildRuntimeAsyncApi } from './runtime.asyncapi.js';
import { RuntimeTokens } from './runtime-tokens.js';

function requiredHeader(headers: Readonly<Record<string, string>>, name: string, code: string, what: string): string {
  const value = headers[name.toLowerCase()];
  if (value === undefined || value === '') {
    throw new HttpError(400, code, `send ${name}: ${what}`, { family: 'runtime', details: [{ pointer: `/${name}`, in: 'header', code: 'required', message: `${name} is required` }] });
  }
  return value;
}

/**
 * The lease claims of an active-only call; undefined when neither header is sent (the session's state then says why it
 * has no lease), 400 when they are half sent or malformed.
 */
function leaseClaims(headers: Readonly<Record<string, string>>): { leaseId: string; version: number } | undefined {
  if (!headers['x-platform-runtime-lease'] && !headers['x-platform-runtime-lease-version']) return undefined;
  const leaseId = requiredHeader(headers, 'X-Platform-Runtime-Lease', 'runtime_lease_required', 'the lease of the active session');
  const version = requiredHeader(headers, 'X-Platform-Runtime-Lease-Version', 'runtime_lease_required', 'the version of that lease');
  if (!LEASE_VERSION.test(version)) {
    throw new HttpError(400, 'runtime_lease_required', 'X-Platform-Runtime-Lease-Version must be a positive integer', { family: 'runtime' });
  }
  return { leaseId, version: Number(version) };
}

/**
 * The Runtime plane: sessions and the one fenced lease per person, their credentials, and the sockets that follow
 * them. Built on identity (runtime access tokens are the Environment clients' OIDC access tokens).
 */
export interface RuntimeServices {
  readonly tokens: RuntimeTokens;
  readonly activity: RuntimeActivity;
  readonly sessions: RuntimeSessions;
  readonly pluginGrants: PluginGrants;
}

const built = new WeakMap<ServerServices, Promise<RuntimeServices>>();

/** One set of Runtime services per server, whichever feature asks first (the Media control plane follows sessions too). */
export function runtimeServices(services: ServerServices): Promise<RuntimeServices> {
  let pending = built.get(services);
  if (!pending) built.set(services, (pending = buildRuntimeServices(services)));
  return pending;
}

async function buildRuntimeServices(services: ServerServices): Promise<RuntimeServices> {
  const { host, clock, storage, publicUrl, logger, config } = services;
  const identity = await identityServices(services);
  const log = logger.child({ component: 'runtime' });
  const tokens = new RuntimeTokens({ keys: identity.keys, grants: identity.grants, directory: identity.directory, epochOf: identity.accounts.epochOf, issuer: publicUrl, clock });
  const activity = new RuntimeActivity(clock);
  const sessions = new RuntimeSessions({
    host,
    clock,
    db: storage.db,
    directory: identity.directory,
    quota: new EvictionQuota(clock, config.runtimeEvictionsPerMinute),
    activity,
    leaseTtlMs: config.runtimeLeaseTtlSeconds * 1000,
    sessionsPerEnvironment: config.runtimeSessionsPerEnvironment,
    sessionIdleTtlMs: config.runtimeSessionIdleSeconds * 1000,
    warn: (details, message) => log.warn(details, message),
    signInLive: (grantId) => tokens.signInLive(grantId),
  });
  const installations = pluginInstallations(services);
  const pluginGrants = new PluginGrants(storage.db, clock, sessions, (grantId) => tokens.signInLive(grantId), (environmentId, pluginId) => installations.installed(environmentId, pluginId));
  return { tokens, activity, sessions, pluginGrants };
}

export function runtimeFeature(): ServerParts {
  let leaseEnded: ((ended: LeaseEnded) => void) | undefined;
  let idleExpired: ((expired: SessionIdleExpired) => void) | undefined;
  let leaseCheck: ((check: SessionLeaseCheck) => void) | undefined;
  let sockets: ReturnType<typeof runtimeSockets> | undefined;
  return {
    // Before the build binds them, nothing is told: the lease and its entries still lapse on their own deadlines.
    kinds: runtimeKinds(
      (ended) => leaseEnded?.(ended),
      (expired) => idleExpired?.(expired),
      (check) => leaseCheck?.(check),
    ),
    build: async (services) => {
      const { clock, storage, publicUrl, logger, config } = services;
      const identity = await identityServices(services);
      const { tokens, activity, sessions, pluginGrants } = await runtimeServices(services);
      const log = logger.child({ component: 'runtime' });
      leaseEnded = sessions.leaseEnded;
      idleExpired = sessions.idleExpired;
      leaseCheck = sessions.leaseCheck;
      identity.sessions.onLogout(async (browserId, pass) => {
        try {
          const revoked = await sessions.revokeBrowser(browserId, pass);
          if (revoked > 0) log.info({ revoked, pass }, 'runtime sessions revoked by browser logout');
        } catch (err) {
          // The second look follows the sign-in's end: the browser cannot retry the logout any more.
          if (pass === 'before') throw err;
          log.warn({ err, browserId }, "a session created while its browser logged out may have outlived the logout (its sign-in has ended)");
        }
      });
      identity.accounts.onEpochRaised((accountId) => activity.signInsChanged(accountId));
      identity.grants.onRevoked((accountId) => activity.signInsChanged(accountId));
      const controlTokens = new ControlTokens(identity.keys, clock, publicUrl);

      const sessionIdOf = (headers: Readonly<Record<string, string>>): string =>
        requiredHeader(headers, 'X-Platform-Runtime-Session', 'runtime_session_required', 'the Runtime session this call belongs to');
      const verifiers: Record<'runtimeToken' | 'runtimeSession' | 'runtimeActivation' | 'runtimeActive', CredentialVerifier> = {
        runtimeToken: async (request) => {
          const caller = await tokens.caller(request.headers);
          return { credential: 'runtimeToken', subject: caller.accountId, caller };
        },
        runtimeSession: async ({ headers }) => {
          const caller = await tokens.caller(headers);
          const sessionId = sessionIdOf(headers);
          await sessions.session(caller, sessionId);
          return { credential: 'runtimeSession', subject: caller.accountId, caller, sessionId };
        },
        runtimeActivation: async ({ headers }) => {
          const caller = await tokens.caller(headers);
          return { credential: 'runtimeActivation', subject: caller.accountId, caller, sessionId: sessionIdOf(headers) };
        },
        runtimeActive: async ({ headers }) => {
          const caller = await tokens.caller(headers);
          const sessionId = sessionIdOf(headers);
          const claimed = leaseClaims(headers);
          const state = await sessions.requireLease(caller, sessionId, claimed);
          const lease = { id: state.lease!.leaseId, version: state.lease!.version };
          const holdFence = (): Promise<() => void> => sessions.holdLease(caller, sessionId, claimed);
          return { credential: 'runtimeActive', subject: caller.accountId, caller, sessionId, lease, holdFence };
        },
      };
      sockets = runtimeSockets({
        tokens,
        sessions,
        controlTokens,
        activity,
        clock,
        messagesPerMinute: config.runtimeSocketMessagesPerMinute,
        warn: (details, message) => log.warn(details, message),
      });
      let asyncApiText: string | undefined;
      const asyncApi = (): string => (asyncApiText ??= JSON.stringify(buildRuntimeAsyncApi(new URL(publicUrl()).host)));
      const backendGrants = new BackendGrants(storage.db, clock, sessions, (grantId) => tokens.signInLive(grantId));
      const grantSweep = scheduleSweep('runtime grants', (signal) => sweepEndedRuntimeGrants(storage.db, clock.now(), signal), {
        intervalMs: 10 * 60_000,
        firstRunMs: 60_000,
        logger: log,
        observer: services.metrics.sweeps,
      });
      return {
        routes: [
          ...runtimeSessionRoutes({
            sessions,
            controlTokens,
            asyncApi,
            limits: {
              evictionsPerMinute: config.runtimeEvictionsPerMinute,
              sessionsPerEnvironment: config.runtimeSessionsPerEnvironment,
              sessionIdleSeconds: config.runtimeSessionIdleSeconds,
              leaseTtlSeconds: config.runtimeLeaseTtlSeconds,
              endedRetentionDays: config.actorEndedRetentionDays,
            },
          }),
          ...environmentBackendRoutes({ grants: backendGrants, sessions }),
          ...pluginGrantRoutes({ grants: pluginGrants, sessions }),
        ],
        opsRoutes: environmentBackendOpsRoutes({ grants: backendGrants, environmentExists: async (id) => (await identity.directory.environment(id)) !== undefined }),
        verifiers,
        stop: async () => {
          await grantSweep.stop();
          await sockets?.stop();
        },
        // The Runtime's browser calls come from the pages of registered Environments, cross-origin.
        corsOrigins: (origin) => identity.directory.isEnvironmentOrigin(origin),
      };
    },
    sockets: (_services, mount) => {
      if (!sockets) throw new Error('the runtime feature mounts its sockets after it is built');
      mount(sockets.runtime);
      mount(sockets.control);
    },
  };
}
