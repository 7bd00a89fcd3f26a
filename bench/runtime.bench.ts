/**
 * Runtime plane benchmark, in three parts, each printed beside a baseline measured in the same run on the same machine.
 *
 *   npm run bench:runtime              (builds, then runs dist/bench/runtime.bench.js; about 3½ minutes)
 *
 * Every server runs in a process of its own, forked from this one (bench/support/*.process.ts): the server under
 * test is the real server (`startServer` with the product's parts, as server/main.ts runs it; one for parts a and b,
 * two more for part c), and this process is only the load generator, so client and server never share an event
 * loop; the echo baselines run the same way. Postgres is embedded (or BENCH_DATABASE_URL); a CHECKPOINT precedes
 * parts a and b. Postgres CPU is that of the embedded cluster's processes (descendants of this one, so other clusters
 * on a shared machine do not count), or of every visible `postgres` process on BENCH_DATABASE_URL. The server under
 * test runs with LOG_LEVEL=silent and two limits raised, which the measured paths would otherwise hit by design:
 * RUNTIME_SOCKET_MESSAGES_PER_MINUTE=60,000,000 (the per-socket client message limit, default 12,000, i.e. 200/s:
 * part b sends thousands per second per socket) and RUNTIME_EVICTIONS_PER_MINUTE=1000 (the per-person eviction quota,
 * default 10, at most 1000: part a makes each person's pages take the lease from each other about once a second).
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
 *     keeping BENCH_IN_FLIGHT (16) `presence.update` messages in flight (alternating away/available, so each one
 *     changes the session actor: the lease fence checked, the actor's transition, in order with its other events;
 *     presence is ephemeral, so nothing is written to Postgres) for BENCH_MESSAGE_MS.
 *     messages/s counts replies inside the window; latency is send → reply, each reply matched to its message by the
 *     `ref` it echoes (the runtime may answer a socket's messages out of order). Baselines, same client code (`ws`
 *     package, every reply JSON-parsed, its type checked and its `ref` matched), same number of sockets, same
 *     pipelining, same message bytes: a raw uWebSockets.js echo server and a `ws` echo server, each in its own process
 *     (bench/support/echo-server.process.ts). Order: uWS, ws, runtime, ws, uWS; each baseline's better run counts.
 *     Targets: runtime ≥ 60 % of raw uWS, and ahead of `ws`.
 *     The echo servers do no work per message by design: the gap is the price of a validated, fenced message handled
 *     by its actor. On a small machine the echo runs are bound by the one client process (it is printed: cpu client), so
 *     "raw" is what this client can drive, an easier bar than uWS's own ceiling. The CPU columns give each process's
 *     cost per message, which is what to compare across servers. Also printed, from the server's metrics (operator
 *     listener): its group commits during the runtime run, events and actors per batch and the time from sending the
 *     statement to reading its answer (which includes waiting for the server's busy event loop). When a target is
 *     missed (BENCH_PROFILE=auto, the default), one more runtime window is CPU-profiled inside the server (V8 sampling
 *     profiler, over the window only) and printed: self time by area and function, and the project's functions
 *     inclusive; the .cpuprofile is kept.
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
import { availableParallelism } from 'node:os';
import { openBenchDatabase, type BenchDatabase } from './support/bench-database.js';
import { guardBench } from './support/bench-guard.js';
import { sampleMachineCpu } from './support/cpu.js';
import { count, mib, ms, percent, round2, table } from './support/report-format.js';
import { partActivations, type ActivationReport, type HttpRow } from './support/runtime-activations.js';
import { children, config, log, SERVER_ENV, startRuntimeServer, stopChild, TARGET_RATIO, type Profiled } from './support/runtime-bench.js';
import { partIdleSockets, type IdleReport } from './support/runtime-idle-sockets.js';
import { partMessages, type MessageReport, type MessageRow } from './support/runtime-messages.js';

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
      `(a) activations — ${config.principals} people × 2 sessions, ${Math.min(config.concurrency, config.principals)} closed-loop workers over keep-alive HTTP/1.1, ` +
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
    out.push(
      `    cpu = share of one core in the window (server process, ${config.databaseUrl ? 'every visible postgres process' : "the embedded cluster's postgres processes"}, this load generator)`,
    );
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
    if (b.commits) {
      const c = b.commits;
      out.push(
        `    group commits in the runtime run: ${count(c.batches)}, each ${c.eventsPerBatch.toFixed(0)} events of ${c.actorsPerBatch.toFixed(1)} actors ` +
          `in ${c.msPerBatch.toFixed(1)} ms (statement sent → answer read, event-loop waits included)`,
      );
    }
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
  const guard = guardBench(cleanup, config.timeoutMs);
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
    guard.disarm();
    await cleanup();
  }
}

await main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
