/** Part b of bench/runtime.bench.ts: messages through the runtime socket beside echo servers (see that file's comment). */
import { RuntimeClient } from '../../client/runtime-client.js';
import { KeepAliveClient } from './http-load.js';
import { count, ms } from './report-format.js';
import {
  activate,
  config,
  createSession,
  eachConcurrent,
  log,
  makePeople,
  profiledWindow,
  startEcho,
  stopChild,
  TARGET_RATIO,
  windowCpu,
  type CpuShares,
  type Profiled,
  type RuntimeServer,
} from './runtime-bench.js';
import { runPipelined, type PipelineResult, type SocketTarget } from './ws-load.js';

export interface MessageRow {
  readonly name: string;
  readonly result: PipelineResult;
  readonly cpu: CpuShares | undefined;
}

/** The server's group commits during the runtime run (its warm-up included), from its own metrics. */
export interface CommitStats {
  readonly batches: number;
  readonly eventsPerBatch: number;
  readonly actorsPerBatch: number;
  readonly msPerBatch: number;
}

export interface MessageReport {
  readonly runs: readonly MessageRow[];
  readonly runtime: MessageRow;
  readonly commits: CommitStats | undefined;
  readonly uws: MessageRow;
  readonly ws: MessageRow;
  readonly ratio: number;
  readonly aheadOfWs: boolean;
  readonly profile: (Profiled & { readonly result: PipelineResult }) | undefined;
}

export async function partMessages(server: RuntimeServer): Promise<MessageReport> {
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
    const before = await commitTotals(server);
    const runtime = await run('runtime socket', server.pid, runtimeTargets, true);
    const commits = commitStats(before, await commitTotals(server));
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
    return { runs, runtime, commits, uws: uwsBest, ws: wsBest, ratio, aheadOfWs, profile };
  } finally {
    await stopChild(uws);
    await stopChild(ws);
  }
}

/** Sums and counts of the server's `registry_commit_*` histograms, read from its operator listener. */
async function commitTotals(server: RuntimeServer): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${server.info.opsPort}/metrics`)).text();
  const totals = new Map<string, number>();
  for (const [, name, value] of text.matchAll(/^(registry_commit_\w+_(?:sum|count))(?:\{[^}]*\})? (\S+)$/gm)) {
    totals.set(name!, (totals.get(name!) ?? 0) + Number(value));
  }
  return totals;
}

function commitStats(before: Map<string, number>, after: Map<string, number>): CommitStats | undefined {
  const delta = (name: string): number => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const batches = delta('registry_commit_batch_events_count');
  if (batches <= 0) return undefined;
  return {
    batches,
    eventsPerBatch: delta('registry_commit_batch_events_sum') / batches,
    actorsPerBatch: delta('registry_commit_batch_actors_sum') / batches,
    msPerBatch: (delta('registry_commit_duration_seconds_sum') * 1000) / batches,
  };
}
