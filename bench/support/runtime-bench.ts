/**
 * What the three parts of bench/runtime.bench.ts share: configuration from the environment, the forked servers and
 * their cleanup, CPU readings over a window, the HTTP calls that make and activate sessions, profiled windows.
 */
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BenchChild } from './bench-child.js';
import type { ProfileSummary } from './cpu-profile.js';
import { MachineCpu } from './cpu.js';
import type { EchoInfo, EchoProtocol } from './echo-server.process.js';
import type { KeepAliveClient, WindowHooks } from './http-load.js';
import { GroupCpu, postgresPids, postgresPidsUnder } from './proc.js';
import { intEnv } from './report-format.js';
import type { BenchEnvironment, BenchPrincipal } from './runtime-fixture.js';
import type { RuntimeServerInfo, RuntimeServerProtocol } from './runtime-server.process.js';

export const TARGET_RATIO = 0.6;
export const FD_MARGIN = 300;

export const config = Object.freeze({
  parts: new Set((process.env.BENCH_PARTS || 'a,b,c').split(',').map((p) => p.trim())),
  principals: intEnv('BENCH_PRINCIPALS', 1_000),
  concurrency: intEnv('BENCH_CONCURRENCY', 128),
  durationMs: intEnv('BENCH_DURATION_MS', 6_000),
  warmupMs: intEnv('BENCH_WARMUP_MS', 1_000),
  sockets: intEnv('BENCH_SOCKETS', 32),
  inFlight: intEnv('BENCH_IN_FLIGHT', 16),
  messageMs: intEnv('BENCH_MESSAGE_MS', 5_000),
  idleSockets: process.env.BENCH_IDLE_SOCKETS === 'max' ? ('max' as const) : intEnv('BENCH_IDLE_SOCKETS', 5_000),
  idlePerEnvironment: intEnv('BENCH_IDLE_PER_ENVIRONMENT', 250),
  idleHoldMs: intEnv('BENCH_IDLE_HOLD_MS', 30_000),
  profile: process.env.BENCH_PROFILE || 'auto',
  timeoutMs: intEnv('BENCH_TIMEOUT_MS', 600_000),
  databaseUrl: process.env.BENCH_DATABASE_URL || undefined,
});

export const SERVER_ENV = Object.freeze({ LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL || 'silent', RUNTIME_SOCKET_MESSAGES_PER_MINUTE: '60000000', RUNTIME_EVICTIONS_PER_MINUTE: '1000' });

export type RuntimeServer = BenchChild<RuntimeServerProtocol, RuntimeServerInfo>;
export const children = new Set<{ stop(graceMs?: number): Promise<void> }>();
export const log = (line: string): void => void process.stderr.write(`bench: ${line}\n`);

export async function startRuntimeServer(databaseUrl: string, env: Readonly<Record<string, string>> = {}): Promise<RuntimeServer> {
  const server = await BenchChild.start<RuntimeServerProtocol, RuntimeServerInfo>(new URL('./runtime-server.process.js', import.meta.url), {
    args: [JSON.stringify({ DATABASE_URL: databaseUrl, ...SERVER_ENV, ...env })],
    // The young-generation size `npm start` gives the server (README), so the bench measures the server as run.
    execArgv: ['--expose-gc', '--max-semi-space-size=32'],
  });
  children.add(server);
  return server;
}

export async function startEcho(implementation: 'uws' | 'ws'): Promise<BenchChild<EchoProtocol, EchoInfo>> {
  const echo = await BenchChild.start<EchoProtocol, EchoInfo>(new URL('./echo-server.process.js', import.meta.url), { args: [implementation] });
  children.add(echo);
  return echo;
}

export async function stopChild(child: { stop(graceMs?: number): Promise<void> }): Promise<void> {
  await child.stop();
  children.delete(child);
}

/**
 * The Postgres processes whose CPU a window counts: the embedded cluster's own (this process started it), so other
 * clusters on a shared machine are not this bench's cost; on BENCH_DATABASE_URL every visible `postgres` process.
 */
const benchPostgres = (): number[] => (config.databaseUrl ? postgresPids() : postgresPidsUnder(process.pid));

/** CPU of the server process, of Postgres and of the whole machine between a window's opening and closing. */
export interface CpuShares {
  /** Shares of one core. */
  readonly server: number;
  /** The embedded cluster's processes (every visible postgres process on BENCH_DATABASE_URL). */
  readonly postgres: number;
  /** Share of all cores, every process. */
  readonly machine: number | undefined;
}

export function windowCpu(serverPid: number): { hooks: WindowHooks; read(): CpuShares | undefined } {
  let opened: { server: GroupCpu; postgres: GroupCpu; machine: MachineCpu; at: number } | undefined;
  let result: CpuShares | undefined;
  return {
    hooks: {
      opened: () => {
        opened = { server: GroupCpu.start(() => [serverPid]), postgres: GroupCpu.start(benchPostgres), machine: MachineCpu.start(), at: performance.now() };
      },
      closed: () => {
        if (!opened) return;
        const seconds = (performance.now() - opened.at) / 1000;
        result = { server: opened.server.seconds() / seconds, postgres: opened.postgres.seconds() / seconds, machine: opened.machine.share() };
      },
    },
    read: () => result,
  };
}

/** Runs `work` over `items` with `concurrency` in flight; throws the first failure after all settled. */
export async function eachConcurrent<T>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, async () => {
      while (next < items.length) {
        const i = next++;
        await work(items[i]!, i).catch((error: unknown) => void (failure ??= error));
      }
    }),
  );
  if (failure !== undefined) throw failure;
}

export interface Profiled {
  readonly path: string;
  readonly summary: ProfileSummary;
}

/**
 * Runs one more measured window with the server's CPU profiler on over that window only (not over the warm-up, the
 * sockets' opening or the drain); the .cpuprofile is written to the temp directory.
 */
export async function profiledWindow<T>(server: RuntimeServer, name: string, run: (hooks: WindowHooks) => Promise<T>): Promise<{ profile: Profiled; result: T }> {
  const file = path.join(tmpdir(), `runtime-bench-${name}-${Date.now()}.cpuprofile`);
  let started: Promise<null> | undefined;
  let stopped: Promise<ProfileSummary> | undefined;
  const result = await run({
    opened: () => void (started = server.request('profile.start', null)),
    closed: () => void (stopped = started?.then(() => server.request('profile.stop', { path: file, top: 12 }))),
  });
  if (!stopped) throw new Error('the profiled window never closed');
  return { profile: { path: file, summary: await stopped }, result };
}

/** A person of the bench as the load generator holds them: token, sessions, which session holds the lease. */
export interface Person {
  readonly principal: BenchPrincipal;
  readonly sessions: string[];
  holder: number;
  busy: boolean;
}

export async function makePeople(server: RuntimeServer, environment: BenchEnvironment, prefix: string, n: number): Promise<BenchPrincipal[]> {
  const out: BenchPrincipal[] = [];
  for (let from = 0; from < n; from += 500) {
    const handles = Array.from({ length: Math.min(500, n - from) }, (_, i) => `${prefix}${String(from + i).padStart(6, '0')}`);
    out.push(...(await server.request('principals', { environment, handles, concurrency: 32 })));
  }
  return out;
}

export const runtimeHeaders = (environment: BenchEnvironment, token: string, sessionId?: string): Record<string, string> => ({
  authorization: `Bearer ${token}`,
  origin: environment.origin,
  ...(sessionId ? { 'x-platform-runtime-session': sessionId } : {}),
});

export async function createSession(client: KeepAliveClient, environment: BenchEnvironment, token: string): Promise<string> {
  const res = await client.request('POST', '/v1/runtime/session', runtimeHeaders(environment, token));
  if (res.status !== 201) throw new Error(`session create: ${res.status} ${res.body.slice(0, 300)}`);
  return (JSON.parse(res.body) as { sessionId: string }).sessionId;
}

export async function activate(client: KeepAliveClient, environment: BenchEnvironment, token: string, sessionId: string): Promise<{ leaseId: string; leaseVersion: number }> {
  const res = await client.request('POST', '/v1/runtime/session/activate', runtimeHeaders(environment, token, sessionId));
  if (res.status !== 200) throw new Error(`activate: ${res.status} ${res.body.slice(0, 300)}`);
  return (JSON.parse(res.body) as { lease: { leaseId: string; leaseVersion: number } }).lease;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
