/**
 * Runtime plane benchmark, in three parts, each printed beside a baseline measured in the same run on the same machine.
 *
 *   npm run bench:runtime              (builds, then runs dist/bench/runtime.bench.js; about 3½ minutes)
 *
 * Every server runs in a process of its own, forked from this one (bench/support/*.process.ts): the server under
 * test is the real server (`startServer` with the product's parts, as server/main.ts runs it; one for parts a and b,
 * two more for part c), and this process is only the load generator, so client and server never share an event
 * loop; the echo baselines run the same way. Postgres is embedded (or BENCH_DATABASE_URL); a CHECKPOINT precedes
 * parts a and b. The server under test runs with LOG_LEVEL=silent and two limits raised, which the measured paths
 * would otherwise hit by design: RUNTIME_SOCKET_MESSAGES_PER_MINUTE=60,000,000 (the per-socket client message limit,
 * default 12,000, i.e. 200/s: part b sends thousands per second per socket) and RUNTIME_EVICTIONS_PER_MINUTE=1000
 * (the per-person eviction quota, default 10, at most 1000: part a makes each person's pages take the lease from each
 * other about once a second).
 *
 * Principals. Enrolment start is rate limited per client address (10/min, burst 20) and the gateway takes the address
 * from the socket (X-Forwarded-For is not honoured), so principals are made inside the server process through the
 * services its routes call (bench/support/runtime-fixture.ts): account enrolled by possession through the actors,
 * then the Environment sign-in completed through OAuthGrants (code issued, exchanged with PKCE: a grant row and a
 * signed runtime access token). Everything measured goes over HTTP or WebSocket with those tokens, as a page would.
 *
 * (a) Activations. BENCH_PRINCIPALS (1,000) people in one Environment, each with two sessions created over HTTP.
 *     After a priming pass (every person's second session activated once), BENCH_CONCURRENCY (128) closed-loop
 *     workers send `POST /v1/runtime/session/activate` over keep-alive HTTP/1.1 (node:http, one connection per
 *     worker), each to the next person not already in flight, for a warm-up and a fixed window:
 *     - evict: the person's other session, so every activation takes the lease from the page holding it (lease
 *       actor commit, session actor commit, the evicted session told `session.superseded`, eviction quota);
 *     - holder: the session that holds the lease activates again (lease renewed, session commit, nobody evicted).
 *     activations/s counts 200s inside the window; latency is request → response, p50/p99/max. Baseline: `GET
 *     /v1/status` through the same client, connections and concurrency, before and after (the better run): the HTTP
 *     path's ceiling on this machine (uWS, the gateway's routing, request id, JSON reply) with none of the Runtime's
 *     work. ratio = activations/s ÷ status/s is the share of that ceiling an activation keeps. Also printed, for where
 *     the rest goes: `GET /v1/runtime/session`, the same credential work (runtime token signature, grant lookup,
 *     account epoch, session ownership) with no commit.
 * (b) Messages. BENCH_SOCKETS (32) runtime sockets of different people (fresh sessions, activated over HTTP), each
 *     keeping BENCH_IN_FLIGHT (16) `presence.update` messages in flight (alternating away/available, so each one is a
 *     durable session-actor commit; the reply `presence.updated` is sent once it committed) for BENCH_MESSAGE_MS.
 *     messages/s counts replies inside the window. Baselines, same client code (`ws` package, every reply JSON-parsed
 *     and its type checked), same number of sockets, same pipelining, same message bytes: a raw uWebSockets.js echo
 *     server and a `ws` echo server, each in its own process (bench/support/echo-server.process.ts). Order: uWS, ws,
 *     runtime, ws, uWS; each baseline's better run counts. Targets: runtime ≥ 60 % of raw uWS, and ahead of `ws`.
 *     The echo servers do no work per message by design: the gap is the price of a validated, fenced, durable
 *     message. On a small machine the echo runs are bound by the one client process (it is printed: cpu client), so
 *     "raw" is what this client can drive, an easier bar than uWS's own ceiling. The CPU columns give each process's
 *     cost per message, which is what to compare across servers. When a target is missed (BENCH_PROFILE=auto, the
 *     default), one more runtime window is CPU-profiled inside the server (V8 sampling profiler, over the window only)
 *     and printed: self time by area and function, and the project's functions inclusive; the .cpuprofile is kept.
 * (c) Idle sockets. N people (BENCH_IDLE_PER_ENVIRONMENT per Environment, so presence hints do not fan out to all N),
 *     each with one standby session, made on a setup server process; then a fresh server process (same database, same
 *     issuer: both run with PUBLIC_BASE_URL=http://registry.bench.invalid so the tokens of one verify on the other)
 *     holds them, so its memory holds only what the measured steps bring. In four steps (at most 5,000), a step's people
 *     activate over HTTP and then open their runtime sockets from a holder process of its own (each loopback
 *     connection costs a descriptor on both sides, and each side has its own open-file limit); a socket counts once the
 *     server sent `ready` and it is still open a moment later. Server VmRSS (/proc/<pid>/status) is read after a forced
 *     GC, until it holds still, after each activation batch and after each socket batch: the growth across socket
 *     batches ÷ sockets is the resident memory per socket, the growth across activation batches ÷ sessions that of an
 *     active session's actors (JS heap likewise). N = BENCH_IDLE_SOCKETS (5,000), or with `max` the open-file limit
 *     minus what the server holds minus a margin of 300 (keep-alive HTTP connections of this load generator, pool
 *     connections, listeners). Then a BENCH_IDLE_HOLD_MS (30 s) hold: server and Postgres CPU (every 30 s the server
 *     renews each open socket's lease and checks its sign-in, so one round falls in the hold) and sockets lost.
 *
 * The runtime socket is sometimes closed by the server (1006) within a millisecond of `ready`: uWS's HttpResponse.cork()
 * epilogue, after an asynchronous upgrade() inside it, can shut down the new WebSocket (uNetworking/uWebSockets#1928).
 * The bench reopens such sockets before measuring and prints them as DEFECT lines; they do not fail the run.
 *
 * Environment (all optional): BENCH_PARTS (a,b,c), BENCH_PRINCIPALS, BENCH_CONCURRENCY, BENCH_DURATION_MS (6000, each
 * window of a), BENCH_WARMUP_MS (1000), BENCH_SOCKETS, BENCH_IN_FLIGHT, BENCH_MESSAGE_MS (5000), BENCH_IDLE_SOCKETS
 * (5000 | max), BENCH_IDLE_PER_ENVIRONMENT (250), BENCH_IDLE_HOLD_MS, BENCH_PROFILE (auto: profile part b when a target
 * is missed | 1: profile parts a and b | 0), BENCH_SERVER_LOG_LEVEL (silent), BENCH_DATABASE_URL, BENCH_TIMEOUT_MS
 * (600000), BENCH_ENFORCE_TARGETS=1 (exit 1 when a target is missed; otherwise the exit code is 1 only when the bench
 * itself failed: refused requests or messages, sockets that could not be opened or were lost).
 */
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { RuntimeClient } from '../client/runtime-client.js';
import { openBenchDatabase, type BenchDatabase } from './support/bench-database.js';
import { BenchChild } from './support/bench-child.js';
import type { ProfileSummary } from './support/cpu-profile.js';
import { MachineCpu, sampleMachineCpu } from './support/cpu.js';
import type { EchoInfo, EchoProtocol } from './support/echo-server.process.js';
import { KeepAliveClient, runClosedLoop, type ClosedLoopResult, type WindowHooks } from './support/http-load.js';
import { GroupCpu, openFds, openFileLimit, postgresPids, rssBytes } from './support/proc.js';
import { count, intEnv, mib, ms, percent, round2, table } from './support/report-format.js';
import type { BenchEnvironment, BenchPrincipal } from './support/runtime-fixture.js';
import type { MemoryReport, RuntimeServerInfo, RuntimeServerProtocol } from './support/runtime-server.process.js';
import type { SocketHolderProtocol } from './support/socket-holder.process.js';
import { runPipelined, type PipelineResult, type SocketTarget } from './support/ws-load.js';

const TARGET_RATIO = 0.6;
const FD_MARGIN = 300;

const config = Object.freeze({
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

const SERVER_ENV = Object.freeze({ LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL || 'silent', RUNTIME_SOCKET_MESSAGES_PER_MINUTE: '60000000', RUNTIME_EVICTIONS_PER_MINUTE: '1000' });

type RuntimeServer = BenchChild<RuntimeServerProtocol, RuntimeServerInfo>;
const children = new Set<{ stop(graceMs?: number): Promise<void> }>();
const log = (line: string): void => void process.stderr.write(`bench: ${line}\n`);

async function startRuntimeServer(databaseUrl: string, env: Readonly<Record<string, string>> = {}): Promise<RuntimeServer> {
  const server = await BenchChild.start<RuntimeServerProtocol, RuntimeServerInfo>(new URL('./support/runtime-server.process.js', import.meta.url), {
    args: [JSON.stringify({ DATABASE_URL: databaseUrl, ...SERVER_ENV, ...env })],
    execArgv: ['--expose-gc'],
  });
  children.add(server);
  return server;
}

async function startEcho(implementation: 'uws' | 'ws'): Promise<BenchChild<EchoProtocol, EchoInfo>> {
  const echo = await BenchChild.start<EchoProtocol, EchoInfo>(new URL('./support/echo-server.process.js', import.meta.url), { args: [implementation] });
  children.add(echo);
  return echo;
}

async function stopChild(child: { stop(graceMs?: number): Promise<void> }): Promise<void> {
  await child.stop();
  children.delete(child);
}

/** CPU of the server process, of Postgres and of the whole machine between a window's opening and closing. */
interface CpuShares {
  /** Shares of one core. */
  readonly server: number;
  readonly postgres: number;
  /** Share of all cores, every process. */
  readonly machine: number | undefined;
}

function windowCpu(serverPid: number): { hooks: WindowHooks; read(): CpuShares | undefined } {
  let opened: { server: GroupCpu; postgres: GroupCpu; machine: MachineCpu; at: number } | undefined;
  let result: CpuShares | undefined;
  return {
    hooks: {
      opened: () => {
        opened = { server: GroupCpu.start(() => [serverPid]), postgres: GroupCpu.start(postgresPids), machine: MachineCpu.start(), at: performance.now() };
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
async function eachConcurrent<T>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
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

interface Profiled {
  readonly path: string;
  readonly summary: ProfileSummary;
}

/**
 * Runs one more measured window with the server's CPU profiler on over that window only (not over the warm-up, the
 * sockets' opening or the drain); the .cpuprofile is written to the temp directory.
 */
async function profiledWindow<T>(server: RuntimeServer, name: string, run: (hooks: WindowHooks) => Promise<T>): Promise<{ profile: Profiled; result: T }> {
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

function profileLines(profile: Profiled, what: string): string[] {
  const { summary } = profile;
  return [
    `    profile of ${what}: server main thread ${percent(summary.busy)} busy; shares of its busy time:`,
    `      self time by area: ${summary.byArea.map((s) => `${s.name} ${percent(s.share)}`).join(', ')}`,
    '      self time, top functions:',
    ...summary.topFunctions.map((f) => `        ${percent(f.share).padStart(5)}  ${f.name}`),
    '      the project\'s functions, inclusive (their own time and what they call):',
    ...summary.topProjectInclusive.map((f) => `        ${percent(f.share).padStart(5)}  ${f.name}`),
    `      profile: ${profile.path} (open in Chrome DevTools → Performance)`,
  ];
}

/** A person of the bench as the load generator holds them: token, sessions, which session holds the lease. */
interface Person {
  readonly principal: BenchPrincipal;
  readonly sessions: string[];
  holder: number;
  busy: boolean;
}

async function makePeople(server: RuntimeServer, environment: BenchEnvironment, prefix: string, n: number): Promise<BenchPrincipal[]> {
  const out: BenchPrincipal[] = [];
  for (let from = 0; from < n; from += 500) {
    const handles = Array.from({ length: Math.min(500, n - from) }, (_, i) => `${prefix}${String(from + i).padStart(6, '0')}`);
    out.push(...(await server.request('principals', { environment, handles, concurrency: 32 })));
  }
  return out;
}

const runtimeHeaders = (environment: BenchEnvironment, token: string, sessionId?: string): Record<string, string> => ({
  authorization: `Bearer ${token}`,
  origin: environment.origin,
  ...(sessionId ? { 'x-platform-runtime-session': sessionId } : {}),
});

async function createSession(client: KeepAliveClient, environment: BenchEnvironment, token: string): Promise<string> {
  const res = await client.request('POST', '/v1/runtime/session', runtimeHeaders(environment, token));
  if (res.status !== 201) throw new Error(`session create: ${res.status} ${res.body.slice(0, 300)}`);
  return (JSON.parse(res.body) as { sessionId: string }).sessionId;
}

async function activate(client: KeepAliveClient, environment: BenchEnvironment, token: string, sessionId: string): Promise<{ leaseId: string; leaseVersion: number }> {
  const res = await client.request('POST', '/v1/runtime/session/activate', runtimeHeaders(environment, token, sessionId));
  if (res.status !== 200) throw new Error(`activate: ${res.status} ${res.body.slice(0, 300)}`);
  return (JSON.parse(res.body) as { lease: { leaseId: string; leaseVersion: number } }).lease;
}

// ---------------------------------------------------------------------------------------------------------------- (a)

interface HttpRow {
  readonly name: string;
  readonly result: ClosedLoopResult;
  readonly cpu: CpuShares | undefined;
}

interface ActivationReport {
  readonly setup: { readonly principalsPerSec: number; readonly sessionsPerSec: number };
  readonly statusRuns: readonly HttpRow[];
  readonly rows: readonly HttpRow[];
  readonly baseline: HttpRow;
  /** With BENCH_PROFILE=1: one more evicting window, profiled. */
  readonly profile: (Profiled & { readonly result: ClosedLoopResult }) | undefined;
}

async function partActivations(server: RuntimeServer): Promise<ActivationReport> {
  const environment = await server.request('environment', { environmentId: 'bench-a' });
  let started = performance.now();
  const principals = await makePeople(server, environment, 'pa', config.principals);
  const principalsPerSec = principals.length / ((performance.now() - started) / 1000);
  const client = new KeepAliveClient(`http://127.0.0.1:${server.info.port}`, config.concurrency);
  try {
    started = performance.now();
    const people: Person[] = principals.map((principal) => ({ principal, sessions: [], holder: -1, busy: false }));
    await eachConcurrent(people, config.concurrency, async (person) => {
      person.sessions.push(await createSession(client, environment, person.principal.accessToken), await createSession(client, environment, person.principal.accessToken));
    });
    const sessionsPerSec = (2 * people.length) / ((performance.now() - started) / 1000);
    // Priming: every person's second session takes the lease once, so each activation of the window evicts.
    await eachConcurrent(people, config.concurrency, async (person) => {
      await activate(client, environment, person.principal.accessToken, person.sessions[1]!);
      person.holder = 1;
    });
    log(`a: ${people.length} people, ${2 * people.length} sessions, primed`);

    let cursor = 0;
    const nextPerson = (): Person => {
      for (;;) {
        const person = people[cursor++ % people.length]!;
        if (!person.busy) return person;
      }
    };
    const measure = async (name: string, op: () => Promise<void>): Promise<HttpRow> => {
      const cpu = windowCpu(server.pid);
      const result = await runClosedLoop({ concurrency: config.concurrency, warmupMs: config.warmupMs, durationMs: config.durationMs, op, hooks: cpu.hooks });
      log(`a: ${name}: ${count(result.perSec)}/s, p99 ${ms(result.latency.p99)} ms, ${result.failures} failed`);
      return { name, result, cpu: cpu.read() };
    };
    const status = (): Promise<HttpRow> =>
      measure('GET /v1/status', async () => {
        const res = await client.request('GET', '/v1/status');
        if (res.status !== 200) throw new Error(`status: ${res.status} ${res.body.slice(0, 300)}`);
      });
    const activation = (choose: (person: Person) => number) => async (): Promise<void> => {
      const person = nextPerson();
      person.busy = true;
      try {
        const target = choose(person);
        await activate(client, environment, person.principal.accessToken, person.sessions[target]!);
        person.holder = target;
      } finally {
        person.busy = false;
      }
    };

    const statusBefore = await status();
    const read = await measure('GET /v1/runtime/session', async () => {
      const person = nextPerson();
      const res = await client.request('GET', '/v1/runtime/session', runtimeHeaders(environment, person.principal.accessToken, person.sessions[person.holder]!));
      if (res.status !== 200) throw new Error(`session read: ${res.status} ${res.body.slice(0, 300)}`);
    });
    const evict = await measure('activate, evicting', activation((person) => 1 - person.holder));
    const holder = await measure('activate, holder', activation((person) => person.holder));
    const statusAfter = await status();
    const baseline = statusAfter.result.perSec > statusBefore.result.perSec ? statusAfter : statusBefore;
    let profile: ActivationReport['profile'];
    if (config.profile === '1') {
      const profiled = await profiledWindow(server, 'activations', (hooks) =>
        runClosedLoop({ concurrency: config.concurrency, warmupMs: config.warmupMs, durationMs: config.durationMs, op: activation((person) => 1 - person.holder), hooks }),
      );
      profile = { ...profiled.profile, result: profiled.result };
    }
    return { setup: { principalsPerSec, sessionsPerSec }, statusRuns: [statusBefore, statusAfter], rows: [baseline, read, evict, holder], baseline, profile };
  } finally {
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------------------------- (b)

interface MessageRow {
  readonly name: string;
  readonly result: PipelineResult;
  readonly cpu: CpuShares | undefined;
}

interface MessageReport {
  readonly runs: readonly MessageRow[];
  readonly runtime: MessageRow;
  readonly uws: MessageRow;
  readonly ws: MessageRow;
  readonly ratio: number;
  readonly aheadOfWs: boolean;
  readonly profile: (Profiled & { readonly result: PipelineResult }) | undefined;
}

async function partMessages(server: RuntimeServer): Promise<MessageReport> {
  const environment = await server.request('environment', { environmentId: 'bench-b' });
  const principals = await makePeople(server, environment, 'pb', config.sockets);
  const client = new KeepAliveClient(`http://127.0.0.1:${server.info.port}`, 16);
  const runtimeTargets: SocketTarget[] = [];
  try {
    await eachConcurrent(principals, 16, async (principal) => {
      const sessionId = await createSession(client, environment, principal.accessToken);
      const lease = await activate(client, environment, principal.accessToken, sessionId);
      const page = new RuntimeClient(`http://127.0.0.1:${server.info.port}`, principal.accessToken, environment.origin);
      page.sessionId = sessionId;
      page.lease = lease;
      runtimeTargets.push({ url: page.socketUrl(), protocols: RuntimeClient.subprotocols(principal.accessToken), origin: environment.origin });
    });
  } finally {
    client.close();
  }
  const [uws, ws] = [await startEcho('uws'), await startEcho('ws')];
  const echoTargets = (port: number): SocketTarget[] =>
    runtimeTargets.map(() => ({ url: `ws://127.0.0.1:${port}/`, protocols: [], origin: environment.origin }));
  const run = async (name: string, pid: number, targets: readonly SocketTarget[], runtime: boolean): Promise<MessageRow> => {
    const cpu = windowCpu(pid);
    const result = await runPipelined({
      targets,
      inFlight: config.inFlight,
      warmupMs: config.warmupMs,
      durationMs: config.messageMs,
      replyType: runtime ? 'presence.updated' : 'presence.update',
      ...(runtime ? { readyType: 'ready' } : {}),
      hooks: cpu.hooks,
    });
    log(`b: ${name}: ${count(result.perSec)} msgs/s, p99 ${ms(result.latency.p99)} ms, ${result.failures} failed`);
    return { name, result, cpu: cpu.read() };
  };
  try {
    const runs: MessageRow[] = [];
    runs.push(await run('uWS echo', uws.pid, echoTargets(uws.info.port), false));
    runs.push(await run('ws echo', ws.pid, echoTargets(ws.info.port), false));
    const runtime = await run('runtime socket', server.pid, runtimeTargets, true);
    runs.push(runtime);
    runs.push(await run('ws echo', ws.pid, echoTargets(ws.info.port), false));
    runs.push(await run('uWS echo', uws.pid, echoTargets(uws.info.port), false));
    const best = (name: string): MessageRow => runs.filter((r) => r.name === name).reduce((a, b) => (b.result.perSec > a.result.perSec ? b : a));
    const uwsBest = best('uWS echo');
    const wsBest = best('ws echo');
    const ratio = runtime.result.perSec / uwsBest.result.perSec;
    const aheadOfWs = runtime.result.perSec > wsBest.result.perSec;
    let profile: MessageReport['profile'];
    const missed = ratio < TARGET_RATIO || !aheadOfWs;
    if (config.profile === '1' || (config.profile === 'auto' && missed)) {
      const profiled = await profiledWindow(server, 'messages', (hooks) =>
        runPipelined({
          targets: runtimeTargets,
          inFlight: config.inFlight,
          warmupMs: config.warmupMs,
          durationMs: config.messageMs,
          replyType: 'presence.updated',
          readyType: 'ready',
          hooks,
        }),
      );
      profile = { ...profiled.profile, result: profiled.result };
    }
    return { runs, runtime, uws: uwsBest, ws: wsBest, ratio, aheadOfWs, profile };
  } finally {
    await stopChild(uws);
    await stopChild(ws);
  }
}

// ---------------------------------------------------------------------------------------------------------------- (c)

/** Both servers of part c sign and check tokens under this issuer, so the second accepts what the first issued. */
const IDLE_ISSUER = 'http://registry.bench.invalid';

interface MemoryPoint {
  /** Sessions activated and sockets held when read. */
  readonly active: number;
  readonly sockets: number;
  /** VmRSS after a forced GC. */
  readonly vmRss: number | undefined;
  readonly memory: MemoryReport;
  readonly fds: number | undefined;
}

interface IdlePerson {
  readonly environment: BenchEnvironment;
  readonly accessToken: string;
  readonly sessionId: string;
}

interface IdleReport {
  readonly planned: number;
  readonly fdLimit: number | undefined;
  readonly environments: number;
  /** People made in-process per second; standby sessions created over HTTP per second. */
  readonly setup: { readonly seconds: number; readonly peoplePerSec: number; readonly sessionsPerSec: number };
  readonly opened: number;
  readonly failed: number;
  readonly firstFailure: string | undefined;
  readonly activationsPerSec: number;
  readonly upgradesPerSec: number;
  /** Sockets the server closed right after `ready` (reopened: see openHeld). */
  readonly dropped: number;
  readonly firstDrop: string | undefined;
  readonly lost: number;
  readonly firstLoss: string | undefined;
  /** The fresh server with nothing live, then after each step's activations and after its sockets. */
  readonly points: readonly MemoryPoint[];
  readonly afterHold: MemoryPoint;
  /** VmRSS (and JS heap) grown by the steps' activations ÷ sessions activated, and by their sockets ÷ sockets held. */
  readonly perSession: { readonly rss: number; readonly heap: number } | undefined;
  readonly perSocket: { readonly rss: number; readonly heap: number } | undefined;
  readonly hold: CpuShares | undefined;
  readonly holderRss: { readonly before: number | undefined; readonly after: number | undefined };
}

/**
 * Setup on one server process (people, standby sessions), measurement on a fresh one: its memory then holds only
 * what the measured steps bring (the setup's garbage and heap high-water mark would otherwise hide the growth).
 */
async function partIdleSockets(databaseUrl: string): Promise<IdleReport> {
  const setupServer = await startRuntimeServer(databaseUrl, { PUBLIC_BASE_URL: IDLE_ISSUER });
  const fdLimit = openFileLimit(setupServer.pid);
  const room = fdLimit === undefined ? undefined : fdLimit - (openFds(setupServer.pid) ?? 0) - FD_MARGIN;
  const planned = config.idleSockets === 'max' ? (room ?? 1_000) : room === undefined ? config.idleSockets : Math.min(config.idleSockets, room);
  if (planned <= 0) throw new Error(`no room for sockets: open-file limit ${fdLimit}`);
  log(`c: ${planned} sockets planned (open-file limit ${fdLimit ?? 'unknown'})`);

  const started = performance.now();
  const environments = Math.ceil(planned / config.idlePerEnvironment);
  const people: IdlePerson[] = [];
  let enrolMs = 0;
  try {
    const client = new KeepAliveClient(`http://127.0.0.1:${setupServer.info.port}`, config.concurrency);
    try {
      for (let e = 0; e < environments; e++) {
        const enrolStarted = performance.now();
        const environment = await setupServer.request('environment', { environmentId: `bench-c-${String(e).padStart(4, '0')}` });
        const n = Math.min(config.idlePerEnvironment, planned - e * config.idlePerEnvironment);
        const handles = Array.from({ length: n }, (_, i) => `pc${String(e * config.idlePerEnvironment + i).padStart(6, '0')}`);
        const principals = await setupServer.request('principals', { environment, handles, concurrency: 32 });
        enrolMs += performance.now() - enrolStarted;
        await eachConcurrent(principals, config.concurrency, async ({ accessToken }) => {
          people.push({ environment, accessToken, sessionId: await createSession(client, environment, accessToken) });
        });
        if ((e + 1) % 10 === 0) log(`c: ${people.length} people with a standby session`);
      }
    } finally {
      client.close();
    }
  } finally {
    await stopChild(setupServer);
  }
  const setupSeconds = (performance.now() - started) / 1000;
  const setup = { seconds: setupSeconds, peoplePerSec: planned / (enrolMs / 1000), sessionsPerSec: planned / (setupSeconds - enrolMs / 1000) };

  const server = await startRuntimeServer(databaseUrl, { PUBLIC_BASE_URL: IDLE_ISSUER });
  const holder = await BenchChild.start<SocketHolderProtocol, null>(new URL('./support/socket-holder.process.js', import.meta.url));
  children.add(holder);
  const client = new KeepAliveClient(`http://127.0.0.1:${server.info.port}`, config.concurrency);
  try {
    // VmRSS after a forced GC is read until it holds still (V8 and malloc give pages back lazily).
    const settled = async (active: number, sockets: number): Promise<MemoryPoint> => {
      let last: MemoryPoint | undefined;
      for (let i = 0; i < 10; i++) {
        const memory = await server.request('memory', { gc: true });
        await sleep(300);
        const point = { active, sockets, vmRss: rssBytes(server.pid), memory, fds: openFds(server.pid) };
        if (last?.vmRss !== undefined && point.vmRss !== undefined && Math.abs(point.vmRss - last.vmRss) < 256 * 1024) return point;
        last = point;
      }
      return last!;
    };
    await sleep(1_000);
    const points: MemoryPoint[] = [await settled(0, 0)];
    const holderBefore = rssBytes(holder.pid);
    let active = 0;
    let opened = 0;
    let failed = 0;
    let firstFailure: string | undefined;
    let dropped = 0;
    let firstDrop: string | undefined;
    let activateMs = 0;
    let openMs = 0;
    // Few large steps: each reading carries a few MiB of noise (GC timing, V8's page granularity), and the noise of
    // every step adds up in the sums while the growth does not.
    const step = Math.max(1, Math.min(5_000, Math.ceil(people.length / 4)));
    for (let i = 0; i < people.length; i += step) {
      // Each step: its people activate (a page takes the lease), then open their runtime sockets.
      const batch = people.slice(i, i + step);
      const targets = new Array<SocketTarget>(batch.length);
      const activateStarted = performance.now();
      await eachConcurrent(batch, config.concurrency, async (person, j) => {
        const lease = await activate(client, person.environment, person.accessToken, person.sessionId);
        const page = new RuntimeClient(`http://127.0.0.1:${server.info.port}`, person.accessToken, person.environment.origin);
        page.sessionId = person.sessionId;
        page.lease = lease;
        targets[j] = { url: page.socketUrl(), protocols: RuntimeClient.subprotocols(person.accessToken), origin: person.environment.origin };
      });
      activateMs += performance.now() - activateStarted;
      active += batch.length;
      points.push(await settled(active, opened));
      const held = await holder.request('open', { targets, concurrency: 64 });
      opened += held.opened;
      failed += held.failed;
      firstFailure ??= held.firstFailure;
      dropped += held.dropped;
      firstDrop ??= held.firstDrop;
      openMs += held.ms;
      points.push(await settled(active, opened));
      log(`c: ${opened} sockets held, server VmRSS ${mib(points.at(-1)!.vmRss)}`);
    }
    const holderAfter = rssBytes(holder.pid);

    log(`c: holding ${opened} idle sockets for ${config.idleHoldMs / 1000} s`);
    const cpu = windowCpu(server.pid);
    cpu.hooks.opened?.();
    await sleep(config.idleHoldMs);
    cpu.hooks.closed?.();
    const status = await holder.request('status', null);
    const afterHold = await settled(active, status.open);
    await holder.request('close', null);
    return {
      planned,
      fdLimit,
      environments,
      setup,
      opened,
      failed,
      firstFailure,
      activationsPerSec: active / (activateMs / 1000),
      upgradesPerSec: opened / (openMs / 1000),
      dropped,
      firstDrop,
      lost: status.lost,
      firstLoss: status.firstLoss,
      points,
      afterHold,
      perSession: growth(points, 'active', active),
      perSocket: growth(points, 'sockets', opened),
      hold: cpu.read(),
      holderRss: { before: holderBefore, after: holderAfter },
    };
  } finally {
    client.close();
    await stopChild(holder);
    await stopChild(server);
  }
}

/**
 * Memory grown by the steps that raised `by` (activations, or sockets), divided by how many they added: consecutive
 * readings alternate between the two, so each delta belongs to one of them.
 */
function growth(points: readonly MemoryPoint[], by: 'active' | 'sockets', total: number): { rss: number; heap: number } | undefined {
  let rss = 0;
  let heap = 0;
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1]!, points[i]!];
    if (b[by] === a[by]) continue;
    if (a.vmRss === undefined || b.vmRss === undefined) return undefined;
    rss += b.vmRss - a.vmRss;
    heap += b.memory.heapUsed - a.memory.heapUsed;
  }
  return total > 0 ? { rss: rss / total, heap: heap / total } : undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// ----------------------------------------------------------------------------------------------------------- report

interface Results {
  activations?: ActivationReport;
  messages?: MessageReport;
  idle?: IdleReport;
}

function micros(cpuCoreShare: number | undefined, perSec: number): string {
  return cpuCoreShare === undefined || perSec <= 0 ? '—' : ((cpuCoreShare * 1e6) / perSec).toFixed(0);
}

function report(results: Results, where: string, background: number | undefined, startedAt: number): { pass: boolean | undefined; broken: string[] } {
  const out: string[] = [''];
  const broken: string[] = [];
  /** Server misbehaviour the bench worked around (and so measured past), named so it is not forgotten. */
  const defects: string[] = [];
  out.push(
    `runtime benchmark — Postgres: ${where}; machine: ${availableParallelism()} cores, ` +
      `${background === undefined ? 'background load unknown' : `${percent(background)} busy before the bench started`} (figures are only comparable between quiet runs)`,
  );
  out.push(`server: own process, LOG_LEVEL=${SERVER_ENV.LOG_LEVEL}, RUNTIME_SOCKET_MESSAGES_PER_MINUTE=${SERVER_ENV.RUNTIME_SOCKET_MESSAGES_PER_MINUTE}, RUNTIME_EVICTIONS_PER_MINUTE=${SERVER_ENV.RUNTIME_EVICTIONS_PER_MINUTE}`);

  const a = results.activations;
  if (a) {
    out.push('');
    out.push(
      `(a) activations — ${config.principals} people × 2 sessions, ${config.concurrency} closed-loop workers over keep-alive HTTP/1.1, ` +
        `window ${config.durationMs / 1000} s after ${config.warmupMs / 1000} s warm-up`,
    );
    out.push(`    setup (in-process enrolment + sign-in): ${count(a.setup.principalsPerSec)} people/s; session create over HTTP: ${count(a.setup.sessionsPerSec)}/s`);
    out.push('');
    const header = ['path', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'vs status', 'cpu server/pg/client', 'µs/req server:pg:client', 'fail'];
    out.push(
      ...table(
        header,
        a.rows.map((r) => [
          r.name,
          count(r.result.perSec),
          ms(r.result.latency.p50),
          ms(r.result.latency.p99),
          ms(r.result.latency.max),
          percent(r.result.perSec / a.baseline.result.perSec),
          `${percent(r.cpu?.server)}/${percent(r.cpu?.postgres)}/${percent(r.result.clientCpu)}`,
          `${micros(r.cpu?.server, r.result.perSec)}:${micros(r.cpu?.postgres, r.result.perSec)}:${micros(r.result.clientCpu, r.result.perSec)}`,
          String(r.result.failures),
        ]),
      ),
    );
    out.push(`    status runs (before, after): ${a.statusRuns.map((r) => count(r.result.perSec)).join(', ')}/s; the better is the baseline`);
    out.push('    cpu = share of one core in the window (server process, every postgres process, this load generator)');
    if (a.profile) {
      out.push('');
      out.push(...profileLines(a.profile, `one more evicting window (${count(a.profile.result.perSec)} activations/s under the profiler)`));
    }
    for (const r of a.rows) if (r.result.failures > 0) broken.push(`(a) ${r.name}: ${r.result.failures} failed, first: ${r.result.firstFailure}`);
  }

  const b = results.messages;
  if (b) {
    out.push('');
    out.push(
      `(b) messages — ${config.sockets} sockets × ${config.inFlight} in flight, presence.update ↔ reply, window ${config.messageMs / 1000} s ` +
        `after ${config.warmupMs / 1000} s warm-up; client: ws package, one process`,
    );
    out.push('');
    const header = ['server', 'msgs/s', 'p50 ms', 'p99 ms', 'max ms', 'vs uWS', 'cpu server/pg/client', 'µs/msg server:pg:client', 'fail', 'drop'];
    out.push(
      ...table(
        header,
        b.runs.map((r) => [
          r.name,
          count(r.result.perSec),
          ms(r.result.latency.p50),
          ms(r.result.latency.p99),
          ms(r.result.latency.max),
          percent(r.result.perSec / b.uws.result.perSec),
          `${percent(r.cpu?.server)}/${percent(r.cpu?.postgres)}/${percent(r.result.clientCpu)}`,
          `${micros(r.cpu?.server, r.result.perSec)}:${micros(r.cpu?.postgres, r.result.perSec)}:${micros(r.result.clientCpu, r.result.perSec)}`,
          String(r.result.failures),
          String(r.result.droppedAtOpen),
        ]),
      ),
    );
    out.push(`    in run order; each baseline's better run counts: uWS ${count(b.uws.result.perSec)}/s, ws ${count(b.ws.result.perSec)}/s`);
    out.push(`    target runtime ≥ ${percent(TARGET_RATIO)} of raw uWS: ${percent(b.ratio)} ${b.ratio >= TARGET_RATIO ? 'PASS' : 'FAIL'}`);
    out.push(`    target runtime ahead of ws: ${count(b.runtime.result.perSec)} vs ${count(b.ws.result.perSec)}/s ${b.aheadOfWs ? 'PASS' : 'FAIL'}`);
    if (b.profile) {
      out.push('');
      out.push(...profileLines(b.profile, `one more runtime window (${count(b.profile.result.perSec)} msgs/s under the profiler)`));
    }
    const drops = [...b.runs.map((r) => r.result), ...(b.profile ? [b.profile.result] : [])].filter((r) => r.droppedAtOpen > 0);
    if (drops.length > 0) {
      defects.push(
        `(b) ${drops.reduce((n, r) => n + r.droppedAtOpen, 0)} of ${drops.length * config.sockets} sockets in ${drops.length} run(s) closed by the server right after they opened ` +
          `(${drops[0]!.firstDrop}); reopened before the window`,
      );
    }
    const profiled = b.profile?.result;
    if (profiled && profiled.failures > 0) broken.push(`(b) profiled runtime run: ${profiled.failures} failed, first: ${profiled.firstFailure}`);
  }

  const c = results.idle;
  if (c) {
    const first = c.points[0]!;
    const last = c.points.at(-1)!;
    const kib = (bytes: number | undefined): string => (bytes === undefined ? '—' : `${(bytes / 1024).toFixed(1)} KiB`);
    out.push('');
    out.push(
      `(c) idle runtime sockets — one fresh server process, open-file limit ${c.fdLimit ?? 'unknown'}; ${count(c.planned)} people in ${c.environments} ` +
        `Environments, one session each`,
    );
    out.push(
      `    setup (another server process, ${c.setup.seconds.toFixed(0)} s): ${count(c.setup.peoplePerSec)} people/s enrolled and signed in in-process, ` +
        `${count(c.setup.sessionsPerSec)}/s standby sessions created over HTTP`,
    );
    out.push(
      `    held: ${count(c.opened)} of ${count(c.planned)} planned (${c.failed} failed, ${c.dropped} dropped right after opening and reopened); ` +
        `activations ${count(c.activationsPerSec)}/s, upgrades ${count(c.upgradesPerSec)}/s with 64 in flight`,
    );
    out.push(
      `    server VmRSS after GC: ${mib(first.vmRss)} fresh → ${mib(last.vmRss)} with ${count(last.active)} active sessions and ${count(last.sockets)} sockets`,
    );
    out.push(
      `    per socket: ${kib(c.perSocket?.rss)} VmRSS (JS heap ${kib(c.perSocket?.heap)}); ` +
        `per activated session before its socket (session, lease and account actors live): ${kib(c.perSession?.rss)} VmRSS (JS heap ${kib(c.perSession?.heap)})`,
    );
    out.push(`    readings (active/sockets: VmRSS): ${c.points.map((p) => `${p.active}/${p.sockets}: ${(p.vmRss === undefined ? NaN : p.vmRss / 1048576).toFixed(0)}`).join(', ')} MiB`);
    out.push(
      `    after the hold: VmRSS ${mib(c.afterHold.vmRss)}, JS heap ${mib(c.afterHold.memory.heapUsed)}; server descriptors ${first.fds ?? '—'} → ${last.fds ?? '—'}; ` +
        `socket holder VmRSS ${mib(c.holderRss.before)} → ${mib(c.holderRss.after)}`,
    );
    out.push(
      `    ${config.idleHoldMs / 1000} s hold: server ${percent(c.hold?.server)} of a core, Postgres ${percent(c.hold?.postgres)} (every 30 s each socket's lease is renewed and its sign-in checked); ` +
        `${c.lost} sockets lost${c.firstLoss ? ` (first: ${c.firstLoss})` : ''}`,
    );
    if (c.failed > 0) broken.push(`(c) ${c.failed} sockets not opened, first: ${c.firstFailure}`);
    if (c.lost > 0) broken.push(`(c) ${c.lost} sockets lost during the hold, first: ${c.firstLoss}`);
    if (c.dropped > 0) defects.push(`(c) ${c.dropped} of ${c.planned} sockets closed by the server right after they opened (${c.firstDrop}); reopened`);
  }

  const pass = b ? b.ratio >= TARGET_RATIO && b.aheadOfWs : undefined;
  out.push('');
  for (const line of defects) out.push(`DEFECT ${line}`);
  if (defects.length > 0) {
    out.push('       (uWS HttpResponse.cork() after an async upgrade() inside it can shut down the new WebSocket: uNetworking/uWebSockets#1928, fix #1929)');
  }
  for (const line of broken) out.push(`BROKEN ${line}`);
  out.push(`overall: ${pass === undefined ? 'n/a (targets are set on part b)' : pass ? 'PASS' : 'FAIL'}${broken.length ? '; the bench saw failures' : ''}`);
  process.stdout.write(`${out.join('\n')}\n`);

  const row = (r: HttpRow) => ({ name: r.name, perSec: Math.round(r.result.perSec), p50Ms: round2(r.result.latency.p50), p99Ms: round2(r.result.latency.p99), maxMs: round2(r.result.latency.max), failures: r.result.failures });
  const msgRow = (r: MessageRow) => ({ name: r.name, perSec: Math.round(r.result.perSec), p50Ms: round2(r.result.latency.p50), p99Ms: round2(r.result.latency.p99), failures: r.result.failures });
  const json = {
    bench: 'runtime',
    postgres: where,
    backgroundCpu: background === undefined ? null : round2(background),
    activations: a
      ? { principals: config.principals, concurrency: config.concurrency, windowMs: config.durationMs, rows: a.rows.map(row), ratioEvict: round2(a.rows[2]!.result.perSec / a.baseline.result.perSec), ratioHolder: round2(a.rows[3]!.result.perSec / a.baseline.result.perSec) }
      : null,
    messages: b
      ? { sockets: config.sockets, inFlight: config.inFlight, windowMs: config.messageMs, runs: b.runs.map(msgRow), ratio: round2(b.ratio), aheadOfWs: b.aheadOfWs, targetRatio: TARGET_RATIO }
      : null,
    idle: c
      ? {
          planned: c.planned,
          held: c.opened,
          fdLimit: c.fdLimit ?? null,
          rssFresh: c.points[0]!.vmRss ?? null,
          rssHeld: c.points.at(-1)!.vmRss ?? null,
          rssPerSocket: c.perSocket ? Math.round(c.perSocket.rss) : null,
          heapPerSocket: c.perSocket ? Math.round(c.perSocket.heap) : null,
          rssPerSession: c.perSession ? Math.round(c.perSession.rss) : null,
          dropped: c.dropped,
          lost: c.lost,
        }
      : null,
    pass: pass ?? null,
    broken: broken.length,
    seconds: Math.round((performance.now() - startedAt) / 1000),
  };
  process.stdout.write(`${JSON.stringify(json)}\n`);
  return { pass, broken };
}

async function main(): Promise<void> {
  const startedAt = performance.now();
  let database: BenchDatabase | undefined;
  const cleanup = async (): Promise<void> => {
    for (const child of [...children]) await child.stop(5_000).catch(() => {});
    await database?.close();
  };
  const abort = (reason: string, code: number): void => {
    process.stderr.write(`bench: ${reason}; cleaning up\n`);
    void cleanup().finally(() => process.exit(code));
  };
  const watchdog = setTimeout(() => abort(`exceeded ${config.timeoutMs / 1000} s`, 2), config.timeoutMs);
  process.once('SIGINT', () => abort('interrupted', 130));
  process.once('SIGTERM', () => abort('terminated', 143));
  // An embedded Postgres outlives a crashed bench: stop it whatever goes wrong.
  process.once('uncaughtException', (error) => abort(`crashed: ${error.stack ?? error.message}`, 1));
  process.once('unhandledRejection', (reason) => abort(`unhandled rejection: ${String(reason)}`, 1));
  try {
    const background = await sampleMachineCpu(1_000);
    log(`starting ${config.databaseUrl ? 'on BENCH_DATABASE_URL' : 'embedded Postgres'}…`);
    database = await openBenchDatabase({ clusterUrl: config.databaseUrl, maxConnections: 2 });
    const results: Results = {};
    if (config.parts.has('a') || config.parts.has('b')) {
      const server = await startRuntimeServer(database.url);
      try {
        if (config.parts.has('a')) {
          await database.checkpoint();
          results.activations = await partActivations(server);
        }
        if (config.parts.has('b')) {
          await database.checkpoint();
          results.messages = await partMessages(server);
        }
      } finally {
        await stopChild(server);
      }
    }
    if (config.parts.has('c')) results.idle = await partIdleSockets(database.url);
    const { pass, broken } = report(results, database.where, background, startedAt);
    if (broken.length > 0 || (pass === false && process.env.BENCH_ENFORCE_TARGETS === '1')) process.exitCode = 1;
  } finally {
    clearTimeout(watchdog);
    await cleanup();
  }
}

await main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
