/** Part c of bench/runtime.bench.ts: idle runtime sockets held by one process (see the comment at the top of that file). */
import { RuntimeClient } from '../../client/runtime-client.js';
import { BenchChild } from './bench-child.js';
import { KeepAliveClient } from './http-load.js';
import { openFds, openFileLimit, rssBytes } from './proc.js';
import { mib } from './report-format.js';
import {
  activate,
  children,
  config,
  createSession,
  eachConcurrent,
  FD_MARGIN,
  log,
  sleep,
  startRuntimeServer,
  stopChild,
  windowCpu,
  type CpuShares,
} from './runtime-bench.js';
import type { BenchEnvironment } from './runtime-fixture.js';
import type { MemoryReport } from './runtime-server.process.js';
import type { SocketHolderProtocol } from './socket-holder.process.js';
import type { SocketTarget } from './ws-load.js';

/** Both servers of part c sign and check tokens under this issuer, so the second accepts what the first issued. */
export const IDLE_ISSUER = 'http://registry.bench.invalid';

export interface MemoryPoint {
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

export interface IdleReport {
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
export async function partIdleSockets(databaseUrl: string): Promise<IdleReport> {
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
  const holder = await BenchChild.start<SocketHolderProtocol, null>(new URL('./socket-holder.process.js', import.meta.url));
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
