import path from 'node:path';
import pg from 'pg';
import type { ActorKind } from '../actors/actor-kind.js';
import { ActorHost } from '../actors/actor-host.js';
import { systemClock, type Clock } from '../actors/clock.js';
import { InProcessOwnership } from '../actors/ownership.js';
import type { ActorStore } from '../storage/actor-store.js';
import { connectStorage, type StorageConnection } from '../storage/connect.js';
import { claimDatabase } from '../storage/database-owner.js';
import type { RunningPostgres } from '../storage/embedded-postgres.js';
import { migrateDatabase } from '../storage/migrate.js';
import { PostgresActorStore } from '../storage/postgres/actor-store.postgres.js';
import { lockDataDir } from './data-dir-lock.js';
import { superviseEmbeddedPostgres } from './embedded-supervisor.js';
import { PostgresIdempotencyStore } from '../storage/postgres/idempotency-store.postgres.js';
import { ActorRetirement } from '../storage/postgres/actor-retirement.js';
import { JournalRetention } from '../storage/postgres/journal-retention.js';
import { scheduleSweep } from '../storage/sweep.js';
import type { CredentialVerifiers } from '../transport/http/credentials.js';
import { HttpGateway, newRequestId } from '../transport/http/gateway.js';
import { buildOpenApiDocument } from '../transport/http/openapi.js';
import { RateLimiter } from '../transport/http/rate-limit.js';
import { FixedJson, type AnyRoute } from '../transport/http/route.js';
import { statusRoutes } from '../transport/http/routes/status.routes.js';
import { operatorVerifier, opsRoutes } from '../transport/ops/ops.routes.js';
import { closeApp, listenExclusive, uws, type TemplatedApp, type us_listen_socket } from '../transport/uws.js';
import { mountWebSocketEndpoint, type MountedWebSocketEndpoint, type WebSocketEndpoint } from '../transport/ws/endpoint.js';
import { retentionCutoffs } from './actor-retention.js';
import type { Config } from './config.js';
import { LogThrottle } from '../actors/log-throttle.js';
import { createLogger, type Logger } from './logger.js';
import { createServerMetrics, type ServerMetrics } from './metrics.js';

/** What feature modules get to build their routes and sockets on. */
export interface ServerServices {
  readonly config: Config;
  readonly host: ActorHost;
  readonly store: ActorStore;
  readonly storage: StorageConnection;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: ServerMetrics;
  /**
   * The public base URL (`PUBLIC_BASE_URL`, else this node's listening address): OIDC issuer and token issuer. Known
   * once the server listens, so read it when handling a request, not while building.
   */
  readonly publicUrl: () => string;
}

/** What a feature contributes once storage and the host exist. */
export interface BuiltFeature {
  readonly routes?: readonly AnyRoute[];
  readonly verifiers?: CredentialVerifiers;
  /** Routes of the operator listener (loopback or OPS_TOKEN), for the operators' command line. */
  readonly opsRoutes?: readonly AnyRoute[];
  /** Stops the feature's background work; runs after requests have drained, before storage closes. */
  readonly stop?: () => Promise<void>;
  /** Origins whose pages may call the routes marked `cors` (any feature's answer yes allows it). */
  readonly corsOrigins?: (origin: string) => Promise<boolean>;
}

/** The product's features, plugged into the core: actor kinds, routes, credential verifiers and socket endpoints. */
export interface ServerParts {
  readonly kinds?: readonly ActorKind[];
  readonly build?: (services: ServerServices) => BuiltFeature | Promise<BuiltFeature>;
  /** Socket endpoints, mounted through `mount` so each gets the server's logger, metrics and shutdown. */
  readonly sockets?: (services: ServerServices, mount: SocketMounter) => void;
}

/** Several features as one: kinds concatenated, builds run in order, their routes and verifiers merged. */
export function combineParts(...parts: readonly ServerParts[]): ServerParts {
  return {
    kinds: parts.flatMap((p) => p.kinds ?? []),
    build: async (services) => {
      const routes: AnyRoute[] = [];
      const opsRoutes: AnyRoute[] = [];
      const stops: Array<() => Promise<void>> = [];
      const verifiers: CredentialVerifiers = {};
      const corsOrigins: Array<(origin: string) => Promise<boolean>> = [];
      for (const part of parts) {
        const built = (await part.build?.(services)) ?? {};
        routes.push(...(built.routes ?? []));
        if (built.corsOrigins) corsOrigins.push(built.corsOrigins);
        opsRoutes.push(...(built.opsRoutes ?? []));
        if (built.stop) stops.push(built.stop);
        for (const [kind, verifier] of Object.entries(built.verifiers ?? {}) as Array<[keyof CredentialVerifiers, CredentialVerifiers[keyof CredentialVerifiers]]>) {
          if (verifiers[kind]) throw new Error(`two features verify credential ${kind}`);
          verifiers[kind] = verifier;
        }
      }
      return {
        routes,
        verifiers,
        opsRoutes,
        stop: async () => void (await Promise.all(stops.map((stop) => stop()))),
        corsOrigins: async (origin) => {
          for (const allows of corsOrigins) if (await allows(origin)) return true;
          return false;
        },
      };
    },
    sockets: (services, mount) => parts.forEach((p) => p.sockets?.(services, mount)),
  };
}

export type SocketMounter = <TUser, TIn, TOut>(endpoint: WebSocketEndpoint<TUser, TIn, TOut>) => void;

export interface RunningServer {
  readonly port: number;
  readonly opsPort: number;
  readonly services: ServerServices;
  /** Stops accepting, finishes in-flight requests, flushes commits, then closes storage. Idempotent. */
  stop(reason: string): Promise<void>;
}

/** Connections of actor loads (PostgresActorStore `loadPool`), beside the shared pool and the commit lanes' own. */
const ACTOR_LOAD_CONNECTIONS = 4;

const API_TAGS: Readonly<Record<string, string>> = {
  Status: 'Health and readiness of the registry service, and this description.',
  Catalog: 'Anonymous discovery: Plugin manifests and the protocol artifacts they pin.',
  Devices: 'Device plane: enrolment of devices into accounts, device assertions, passports.',
  Operations: 'Operator listener: inspection and metrics.',
  Authorization: 'OIDC for registered public Environment and CLI clients: Authorization Code with PKCE (S256 only).',
  Management: 'Management sessions: CLI grants, console sessions, logout; platform administration.',
  Runtime: 'Runtime sessions with one fenced lease per person, control tokens, Environment Backend Grants, plugin settings.',
};

export async function startServer(
  config: Config,
  parts: ServerParts = {},
  options: {
    clock?: Clock;
    logger?: Logger;
    /**
     * Called once the server has stopped of its own accord (another server took its database over); the process's
     * exit is the caller's, since a test's server shares its process.
     */
    stoppedItself?: (reason: string) => void;
  } = {},
): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel, { node: config.nodeId });
  const clock = options.clock ?? systemClock;
  // A restarted or unreachable Postgres fails every idle connection of the pools at once: one line, not one each.
  const poolErrors = new LogThrottle(logger);
  const startedAt = clock.now();
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async (): Promise<void> => {
    for (const step of cleanups.splice(0).reverse()) await step().catch((err: unknown) => logger.warn({ err }, 'cleanup step failed'));
  };
  try {
    if (config.databaseUrl === undefined) cleanups.push(await lockDataDir(config.dataDir));
    const embedded = config.databaseUrl === undefined ? await startEmbedded(config, logger) : undefined;
    if (embedded) cleanups.push(() => embedded.postgres.stop());
    const databaseUrl = config.databaseUrl ?? embedded!.url;
    const storage = connectStorage({
      connectionString: databaseUrl,
      maxConnections: config.databasePoolSize,
      applicationName: `registry-coordination/${config.nodeId}`,
      onError: (err) => poolErrors.say('warn', 'idle connection', { err }, 'idle database connection failed'),
    });
    cleanups.push(() => storage.close());
    // A server that lost its database to another (it froze, or was cut off, for longer than the owner's silence limit)
    // stops: its epochs and replay guard are in memory, and the other server's are not those.
    let stopItself: ((reason: string) => void) | undefined;
    cleanups.push(await claimDatabase(databaseUrl, logger, () => stopItself?.('another server took this database over')));
    const applied = await migrateDatabase(databaseUrl, `registry-coordination/${config.nodeId}/migrate`);
    if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');

    // Actor commits have connections of their own (see PostgresActorStore): closed after the host drains.
    const commitStorage = connectStorage({
      connectionString: databaseUrl,
      maxConnections: config.commitLanes,
      applicationName: `registry-coordination/${config.nodeId}/commits`,
      onError: (err) => poolErrors.say('warn', 'idle connection', { err }, 'idle database connection failed'),
    });
    cleanups.push(() => commitStorage.close());
    // And so do actor loads: a few at once is plenty (one statement each), and more activations queue for them.
    const loadStorage = connectStorage({
      connectionString: databaseUrl,
      maxConnections: ACTOR_LOAD_CONNECTIONS,
      applicationName: `registry-coordination/${config.nodeId}/loads`,
      onError: (err) => poolErrors.say('warn', 'idle connection', { err }, 'idle database connection failed'),
    });
    cleanups.push(() => loadStorage.close());
    const store = new PostgresActorStore({ ...storage, commitPool: commitStorage.pool, loadPool: loadStorage.pool });
    let host: ActorHost | undefined;
    const metrics = createServerMetrics({
      liveActors: () => host?.liveCounts() ?? new Map<string, number>(),
      unrestorableActors: () => host?.unrestorableCount ?? 0,
      httpInFlight: () => gateway.inFlight,
    });
    host = new ActorHost({
      store,
      ownership: new InProcessOwnership(),
      clock,
      kinds: parts.kinds ?? [],
      logger: logger.child({ component: 'actor-host' }),
      observer: metrics.host,
      commitLanes: config.commitLanes,
      maxBatchActors: config.commitMaxBatch,
      passivateAfterMs: config.passivateAfterMs,
      timerPollMs: config.timerPollMs,
    });
    host.start();
    cleanups.push(() => host.drain());

    let listeningUrl: string | undefined;
    const publicUrl = (): string => {
      if (config.publicBaseUrl) return config.publicBaseUrl.replace(/\/$/, '');
      if (!listeningUrl) throw new Error('the public URL is known once the server listens');
      return listeningUrl;
    };
    const services: ServerServices = { config, host, store, storage, clock, logger, metrics, publicUrl };
    const idempotency = new PostgresIdempotencyStore(storage.db, {
      retentionSeconds: config.idempotencyRetentionSeconds,
      claimTimeoutSeconds: 60,
    });
    const idempotencySweep = scheduleSweep('idempotency records', (signal) => idempotency.sweep(signal), {
      intervalMs: 60_000,
      logger,
      observer: metrics.sweeps,
    });
    cleanups.push(() => idempotencySweep.stop());
    const retentionDays = { journalDays: config.actorJournalRetentionDays, endedDays: config.actorEndedRetentionDays };
    const cutoffsNow = () => retentionCutoffs(parts.kinds ?? [], retentionDays, clock.now());
    const atStart = cutoffsNow();
    if (atStart.journal) {
      const retention = new JournalRetention(storage.db);
      // A cycle over every actor, 10 s a minute until it is through, then an hour's rest: retention counts in days
      // (in hours for a kind that keeps less).
      const journalSweep = scheduleSweep(
        'actor journal',
        (signal) => {
          const { before, kinds } = cutoffsNow().journal!;
          return retention.sweep(before, 10_000, signal, kinds);
        },
        { intervalMs: 60_000, restMs: 3600_000, unfinishedIsNormal: true, logger, observer: metrics.sweeps },
      );
      cleanups.push(() => journalSweep.stop());
    }
    if (atStart.ended) {
      const retirement = new ActorRetirement(storage.db);
      const retirementSweep = scheduleSweep('ended actors', (signal) => retirement.sweep(cutoffsNow().ended!, 10_000, signal), {
        intervalMs: 600_000,
        firstRunMs: 60_000,
        logger,
        observer: metrics.sweeps,
      });
      cleanups.push(() => retirementSweep.stop());
    }

    const built = (await parts.build?.(services)) ?? {};
    if (built.stop) cleanups.push(built.stop);
    let openApi: FixedJson<Readonly<Record<string, unknown>>> | undefined;
    const routes: AnyRoute[] = [
      ...statusRoutes({
        nodeId: config.nodeId,
        mode: 'single-node',
        startedAt,
        clock,
        pingStorage: () => store.ping(),
        storageTimeoutMs: 2_000,
        draining: () => gateway.draining,
        openApiDocument: () => openApi!,
      }),
      ...(built.routes ?? []),
    ];
    // Built now so a bad route schema stops the start; rebuilt once listening when its server URL is the listening one
    // (PORT=0, a specific HOST), so it names the same URL as the tokens' issuer.
    // Fixed: the gateway serialises each document once (it does not change), not on every request.
    // The description states this server's limits, not the defaults.
    const limits = { idempotencyRetentionSeconds: config.idempotencyRetentionSeconds, deviceAssertionsPerDevice: config.deviceAssertionsPerDevice };
    const documentFor = (serverUrl: string) => new FixedJson(buildOpenApiDocument(routes, { serverUrl, tags: API_TAGS, limits }));
    openApi = documentFor(config.publicBaseUrl ?? `http://127.0.0.1:${config.port}`);

    const gateway = new HttpGateway({
      routes,
      verifiers: built.verifiers ?? {},
      idempotency,
      logger: logger.child({ component: 'http' }),
      maxBodyBytes: config.maxBodyBytes,
      observer: metrics.http,
      rateLimiter: new RateLimiter(clock),
      ...(built.corsOrigins ? { corsOrigins: built.corsOrigins } : {}),
    });
    const app = uws.App();
    const sockets: MountedWebSocketEndpoint[] = [];
    const socketLogger = logger.child({ component: 'ws' });
    parts.sockets?.(services, (endpoint) => {
      sockets.push(mountWebSocketEndpoint(app, endpoint, { logger: socketLogger, observer: metrics.sockets, newRequestId }));
    });
    gateway.mount(app);
    const listen = await listenOn(app, config.host, config.port);
    cleanups.push(async () => closeApp(app));

    const opsGateway = new HttpGateway({
      routes: [...opsRoutes({ host, store, renderMetrics: metrics.render }), ...(built.opsRoutes ?? [])],
      verifiers: { operator: operatorVerifier(config.opsToken) },
      idempotency,
      logger: logger.child({ component: 'ops' }),
      maxBodyBytes: 64 * 1024,
      // Counted apart from the public operations (`ops:` before the operation): wrong operator tokens must show.
      observer: { requestCompleted: (operation, method, status, ms) => metrics.http.requestCompleted(`ops:${operation}`, method, status, ms) },
    });
    const opsApp = uws.App();
    opsGateway.mount(opsApp);
    const opsListen = await listenOn(opsApp, config.opsHost, config.opsPort);
    cleanups.push(async () => closeApp(opsApp));

    const port = uws.us_socket_local_port(listen);
    const opsPort = uws.us_socket_local_port(opsListen);
    // An unspecified address is reached through loopback; an IPv6 literal goes in brackets, as a URL needs it.
    const reachAt = /^(0\.0\.0\.0|::)$/.test(config.host) ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
    listeningUrl = `http://${reachAt}:${port}`;
    if (config.publicBaseUrl === undefined) openApi = documentFor(listeningUrl);
    logger.info({ port, opsPort, opsHost: config.opsHost, database: embedded ? 'embedded' : 'external' }, 'server listening');

    let stopping: Promise<void> | undefined;
    const stop = (reason: string): Promise<void> =>
      (stopping ??= (async () => {
        logger.info({ reason, inFlight: gateway.inFlight, opsInFlight: opsGateway.inFlight }, 'draining');
        // Both listeners stop taking requests and finish the ones they hold: an operator command in flight (an
        // Environment registered, a plugin configured) is answered like a public request, not cut by the cleanup.
        gateway.startDraining();
        opsGateway.startDraining();
        uws.us_listen_socket_close(listen);
        uws.us_listen_socket_close(opsListen);
        // Socket clients are told to go away (1001) and reconnect elsewhere; nothing of theirs is in flight here.
        for (const endpoint of sockets) endpoint.shutdown(1001, 'server shutting down');
        const [idle, opsIdle] = await Promise.all([gateway.waitIdle(config.shutdownTimeoutMs), opsGateway.waitIdle(config.shutdownTimeoutMs)]);
        if (!idle || !opsIdle) {
          logger.warn({ inFlight: gateway.inFlight, opsInFlight: opsGateway.inFlight }, 'requests still in flight at shutdown timeout');
        }
        await cleanup();
        logger.info({ reason }, 'stopped');
      })());
    stopItself = (reason) => {
      logger.fatal({ reason }, 'stopping: another server took this database over');
      void stop(reason).then(
        () => options.stoppedItself?.(reason),
        () => options.stoppedItself?.(reason),
      );
    };
    return { port, opsPort, services, stop };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

async function startEmbedded(config: Config, logger: Logger): Promise<{ postgres: RunningPostgres; url: string }> {
  const pgLog = logger.child({ component: 'embedded-postgres' });
  const postgres = await superviseEmbeddedPostgres({
    directory: path.join(config.dataDir, 'postgres'),
    // Ctrl-C or a group kill must not stop Postgres under the drain; the server stops it itself on every way out.
    ownProcessGroup: true,
    onLog: (line) => {
      if (line) pgLog.debug({ line }, 'postgres');
    },
  }, pgLog);
  const admin = new pg.Client({ connectionString: postgres.connectionString });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', ['registry']);
    if (exists.rowCount === 0) await admin.query('CREATE DATABASE registry');
  } finally {
    await admin.end();
  }
  logger.info({ dataDir: path.resolve(config.dataDir) }, 'embedded Postgres started');
  return { postgres, url: postgres.urlFor('registry') };
}

function listenOn(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    listenExclusive(app, host, port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${host}:${port} (in use or not permitted)`));
    });
  });
}
