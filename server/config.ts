import { hostname } from 'node:os';
import * as z from 'zod';
import { REPLAY_GUARD_PER_DEVICE } from '../identity/device-assertion.js';

/**
 * A whole number written in decimal digits (blanks around it allowed), checked by `schema`. Not z.coerce: Number()
 * reads an empty or blank value as 0 (an env file's `PORT=` line listened on a random port, `…_RETENTION_DAYS=`
 * switched retention off) and reads 0x1F90 or 8e3 as numbers nobody wrote; each of these is refused instead.
 */
const decimal = (schema: z.ZodNumber) =>
  z.preprocess((value, ctx) => {
    if (typeof value !== 'string') return value;
    if (/^\s*\d+\s*$/.test(value)) return Number(value);
    ctx.addIssue({ code: 'custom', message: `expected a whole number in decimal digits, got ${JSON.stringify(value)}` });
    return z.NEVER;
  }, schema);
const port = decimal(z.number().int().min(0).max(65535));
const positive = (min = 1, max = Number.MAX_SAFE_INTEGER) => decimal(z.number().int().min(min).max(max));
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/**
 * Whether a URL can be the OIDC issuer (and the base of every endpoint it announces): http or https, no query or
 * fragment (RFC 8414 2, OIDC Discovery 3: `…?x` or `…#x` would turn each announced endpoint into one), no user info.
 */
function isIssuer(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '' && !/[?#]/.test(value);
}

/**
 * Every setting, read from the environment once at start. The README's configuration table lists the same names;
 * an invalid value stops the server with a message naming the variable.
 */
const EnvSchema = z.object({
  PORT: port.default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  PUBLIC_BASE_URL: z.url().refine(isIssuer, { message: 'must be an http or https URL without user name, query or fragment (it is the OIDC issuer)' }).optional(),
  OPS_PORT: port.default(9090),
  OPS_HOST: z.string().min(1).default('127.0.0.1'),
  OPS_TOKEN: z.string().min(16).optional(),
  DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: z.string().min(1).optional(),
  DATABASE_POOL_SIZE: positive().default(16),
  REDIS_URL: z.string().min(1).optional(),
  NODE_ID: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/).optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  MAX_BODY_BYTES: positive().default(1024 * 1024),
  ACTOR_PASSIVATE_AFTER_MS: positive().default(5 * 60_000),
  ACTOR_TIMER_POLL_MS: positive().default(1_000),
  COMMIT_LANES: positive(1, 16).default(2),
  COMMIT_MAX_BATCH: positive().default(4_000),
  IDEMPOTENCY_RETENTION_SECONDS: positive().default(24 * 3600),
  ACTOR_JOURNAL_RETENTION_DAYS: decimal(z.number().int().min(0).max(36_500)).default(30),
  ACTOR_ENDED_RETENTION_DAYS: decimal(z.number().int().min(0).max(36_500)).default(30),
  SHUTDOWN_TIMEOUT_MS: positive().default(25_000),
  RUNTIME_LEASE_TTL_SECONDS: positive(10, 3600).default(90),
  RUNTIME_EVICTIONS_PER_MINUTE: positive(1, 1000).default(10),
  DEVICE_ASSERTIONS_PER_DEVICE: positive(10, 1_000_000).default(REPLAY_GUARD_PER_DEVICE),
  // At most 5 minutes: each second of it is a second in which a stolen, just-rotated token is still good for one retry.
  REFRESH_TOKEN_REUSE_GRACE_SECONDS: decimal(z.number().int().min(0).max(300)).default(30),
  RUNTIME_SESSIONS_PER_ENVIRONMENT: positive(2, 1000).default(32),
  RUNTIME_SESSION_IDLE_SECONDS: positive(60, 7 * 24 * 3600).default(1800),
  RUNTIME_SOCKET_MESSAGES_PER_MINUTE: positive().default(12_000),
  MEDIA_WORKERS: positive(1, 256).optional(),
  MEDIA_LISTEN_IP: z.string().min(1).default('127.0.0.1'),
  MEDIA_ANNOUNCED_ADDRESS: z.string().min(1).optional(),
  MEDIA_CONSUMERS_PER_ROUTER: positive(1, 100_000).default(500),
  MEDIA_HOSTING_TTL_SECONDS: positive(3, 3_600).default(60),
  MEDIA_CALLBACK_ALLOW_LOOPBACK: z.enum(['0', '1']).default('0'),
});

/** The names of every variable read, for the test that holds the README's configuration table to them. */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(Object.keys(EnvSchema.shape));

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly publicBaseUrl: string | undefined;
  readonly opsPort: number;
  readonly opsHost: string;
  readonly opsToken: string | undefined;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly databasePoolSize: number;
  readonly nodeId: string;
  readonly logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  readonly maxBodyBytes: number;
  readonly passivateAfterMs: number;
  readonly timerPollMs: number;
  readonly commitLanes: number;
  readonly commitMaxBatch: number;
  readonly idempotencyRetentionSeconds: number;
  /** Journal segments covered by their actor's snapshot are removed this many days after their events; 0 keeps all. */
  readonly actorJournalRetentionDays: number;
  /** Ended actors (released or revoked Runtime sessions) are removed this many days after their end; 0 keeps them. */
  readonly actorEndedRetentionDays: number;
  readonly shutdownTimeoutMs: number;
  /** A Runtime lease lapses this long after its last renewal. */
  readonly runtimeLeaseTtlSeconds: number;
  /** Activations that evict another Runtime, per person per minute (burst and refill). */
  readonly runtimeEvictionsPerMinute: number;
  /** Used device-assertion ids one device may hold inside their window (its share of the replay guard). */
  readonly deviceAssertionsPerDevice: number;
  /** How long after a rotation the spent refresh token may be retried once (a lost reply); 0: never. */
  readonly refreshTokenReuseGraceSeconds: number;
  /** Live (not ended) Runtime sessions per person per Environment. */
  readonly runtimeSessionsPerEnvironment: number;
  /** A Runtime session without the lease (standby, superseded) is released after this long. */
  readonly runtimeSessionIdleSeconds: number;
  /** Client messages per Runtime session per minute on its runtime socket (burst and refill; a newer socket continues the budget). */
  readonly runtimeSocketMessagesPerMinute: number;
  /** mediasoup workers of this node; one per core when unset. */
  readonly mediaWorkers: number | undefined;
  /** Where WebRTC transports listen, and the address clients are told (a public address in front of it). */
  readonly mediaListenIp: string;
  readonly mediaAnnouncedAddress: string | undefined;
  /** Consumers one router takes before a room spreads over another worker (mediasoup: about 500 per worker). */
  readonly mediaConsumersPerRouter: number;
  readonly mediaHostingTtlSeconds: number;
  /**
   * Whether the publisher-authority callback may reach loopback (and then over http): for development and tests,
   * whose Environment backend runs on this host. Off, only public unicast addresses are called; private, link-local
   * and other special-purpose addresses never are (publisher-authority.destination.ts).
   */
  readonly mediaCallbackAllowLoopback: boolean;
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  if (e.REDIS_URL !== undefined) {
    throw new ConfigError(
      'REDIS_URL is set, but cluster mode (Redis-fenced ownership) is not available in this version; unset it to run a single node',
    );
  }
  if (!LOOPBACK.test(e.OPS_HOST) && e.OPS_TOKEN === undefined) {
    throw new ConfigError(`OPS_HOST=${e.OPS_HOST} exposes the operator listener beyond loopback: set OPS_TOKEN too`);
  }
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: e.PUBLIC_BASE_URL,
    opsPort: e.OPS_PORT,
    opsHost: e.OPS_HOST,
    opsToken: e.OPS_TOKEN,
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    nodeId: e.NODE_ID ?? `${hostname()}-${process.pid}`,
    logLevel: e.LOG_LEVEL,
    maxBodyBytes: e.MAX_BODY_BYTES,
    passivateAfterMs: e.ACTOR_PASSIVATE_AFTER_MS,
    timerPollMs: e.ACTOR_TIMER_POLL_MS,
    commitLanes: e.COMMIT_LANES,
    commitMaxBatch: e.COMMIT_MAX_BATCH,
    idempotencyRetentionSeconds: e.IDEMPOTENCY_RETENTION_SECONDS,
    actorJournalRetentionDays: e.ACTOR_JOURNAL_RETENTION_DAYS,
    actorEndedRetentionDays: e.ACTOR_ENDED_RETENTION_DAYS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    runtimeLeaseTtlSeconds: e.RUNTIME_LEASE_TTL_SECONDS,
    runtimeEvictionsPerMinute: e.RUNTIME_EVICTIONS_PER_MINUTE,
    deviceAssertionsPerDevice: e.DEVICE_ASSERTIONS_PER_DEVICE,
    refreshTokenReuseGraceSeconds: e.REFRESH_TOKEN_REUSE_GRACE_SECONDS,
    runtimeSessionsPerEnvironment: e.RUNTIME_SESSIONS_PER_ENVIRONMENT,
    runtimeSessionIdleSeconds: e.RUNTIME_SESSION_IDLE_SECONDS,
    runtimeSocketMessagesPerMinute: e.RUNTIME_SOCKET_MESSAGES_PER_MINUTE,
    mediaWorkers: e.MEDIA_WORKERS,
    mediaListenIp: e.MEDIA_LISTEN_IP,
    mediaAnnouncedAddress: e.MEDIA_ANNOUNCED_ADDRESS,
    mediaConsumersPerRouter: e.MEDIA_CONSUMERS_PER_ROUTER,
    mediaHostingTtlSeconds: e.MEDIA_HOSTING_TTL_SECONDS,
    mediaCallbackAllowLoopback: e.MEDIA_CALLBACK_ALLOW_LOOPBACK === '1',
  });
}
