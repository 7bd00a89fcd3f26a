/**
 * Media stage benchmark: one full stage on one node, printed beside a baseline measured in the same run.
 *
 *   npm run bench:media                (builds, then runs dist/bench/media-stage.bench.js; about one minute)
 *
 * Stage: BENCH_SPEAKERS (16) speakers, each a PlainTransport producer fed by a Node UDP socket with synthetic
 * opus-sized RTP (80-byte payload) at 50 packets/s, and BENCH_LISTENERS (150) listeners, each a PlainTransport that
 * consumes every speaker and sends to a UDP sink counting packets (the sinks run in a thread of their own,
 * bench/support/media-sinks.thread.ts). The room is a real RoomMedia (`transport` encryption, so its AudioLevelObserver
 * runs) on a MediaWorkerPool of the default size (one worker per core), with the default consumer budget (500 per
 * router) and `expectedConsumersPerRecvTransport` = speakers, so 2,400 consumers spread over several routers on every
 * worker, the producers piped to them from the main router with pipeToRouter.
 *
 * Baseline: the same speakers and streams with BENCH_BASELINE_LISTENERS (16) listeners in one router (budget never
 * reached: no pipe), run first. Its forwarded packets per worker-CPU-second is what one router does without spreading;
 * the stage's figure beside it is the price (or gain) of piping and of running several routers per worker.
 *
 * Measured over BENCH_WINDOW_MS (20 s; baseline BENCH_BASELINE_MS, 10 s) after BENCH_WARMUP_MS (3 s) once every
 * consumer is resumed: packets received at the sinks per second against those offered (packets the speakers sent in
 * the window × listeners), loss, each worker's CPU (getResourceUsage ru_utime + ru_stime delta ÷ wall time, in share
 * of one core), consumers per worker (pipe consumers included) next to mediasoup's documented ≈ 500 per worker, and
 * this process's own CPU (senders, sinks, bookkeeping), since it shares the machine's cores with the workers.
 * "Forwarded" comes from the listeners' consumers' outbound RTP stats, read before and after the window; reading 2,400
 * consumers' stats holds the workers up for a moment, so the window starts SETTLE_MS after the first reading (without
 * that, the RTP queued during the reading drained inside the window and the sinks counted ~10 % more than was sent).
 *
 * Environment (all optional): BENCH_SPEAKERS, BENCH_LISTENERS, BENCH_BASELINE_LISTENERS, BENCH_WINDOW_MS,
 * BENCH_BASELINE_MS, BENCH_WARMUP_MS, BENCH_CONSUMER_BUDGET (500), BENCH_TIMEOUT_MS (180000: the run fails rather
 * than hangs). Exit code 1 only when the bench itself failed.
 */
import type { Socket } from 'node:dgram';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { pino } from 'pino';
import { DEFAULT_CONSUMER_BUDGET, RoomMedia, type RouterPlacement } from '../media/room-media.js';
import { MediaWorkerPool, type WorkerLoad } from '../media/worker-pool.js';
import { bindLoopback } from '../test/support/webrtc-wire.js';
import { OPUS_PAYLOAD_TYPE, startRtpStream } from '../test/support/rtp.js';
import { guardBench } from './support/bench-guard.js';
import { sampleMachineCpu } from './support/cpu.js';
import { count, intEnv, percent, round2, table } from './support/report-format.js';

const config = Object.freeze({
  speakers: intEnv('BENCH_SPEAKERS', 16),
  listeners: intEnv('BENCH_LISTENERS', 150),
  baselineListeners: intEnv('BENCH_BASELINE_LISTENERS', 16),
  windowMs: intEnv('BENCH_WINDOW_MS', 20_000),
  baselineMs: intEnv('BENCH_BASELINE_MS', 10_000),
  warmupMs: intEnv('BENCH_WARMUP_MS', 3_000),
  budget: intEnv('BENCH_CONSUMER_BUDGET', DEFAULT_CONSUMER_BUDGET),
  timeoutMs: intEnv('BENCH_TIMEOUT_MS', 180_000),
});
const PACKETS_PER_SECOND = 50;
const DOCUMENTED_CONSUMERS_PER_WORKER = 500;
/** Listeners joining at once: their transports are placed one at a time anyway; consumes overlap. */
const JOIN_CONCURRENCY = 10;
const SETTLE_MS = 2_000;

interface PhaseResult {
  readonly name: string;
  readonly listeners: number;
  readonly windowMs: number;
  readonly routers: readonly RouterPlacement[];
  readonly workers: readonly WorkerLoad[];
  readonly offeredPps: number;
  readonly receivedPps: number;
  /** Packets the listeners' consumers sent (their outbound RTP stats): what the SFU forwarded, sink drops aside. */
  readonly forwardedPps: number;
  /** Forwarded ÷ offered over the same span as the consumer stats were read. */
  readonly forwardedShare: number;
  /** pid → share of one core over the window. */
  readonly workerCpu: ReadonlyMap<number, number>;
  readonly benchCpu: number;
  readonly setupMs: number;
}

/** The UDP sinks' thread: one socket per listener, packet counts in shared memory. */
async function startSinks(n: number): Promise<{ ports: number[]; received(): number; stop(): Promise<void> }> {
  const counters = new SharedArrayBuffer(4 * n);
  const tally = new Int32Array(counters);
  const thread = new Worker(new URL('./support/media-sinks.thread.js', import.meta.url), { workerData: { count: n, counters } });
  const { ports } = await new Promise<{ ports: number[] }>((resolve, reject) => {
    thread.once('message', resolve);
    thread.once('error', reject);
  });
  return {
    ports,
    received: () => tally.reduce((sum, x) => sum + x, 0),
    stop: async () => {
      thread.postMessage('close');
      await new Promise((resolve) => thread.once('exit', resolve));
    },
  };
}

/**
 * Every consumer on a plain transport, which here are the listeners' (pipe consumers are on pipe transports), seen
 * through mediasoup's own observer so the product code needs no bench hook.
 */
const listenerConsumers = new Set<types.Consumer>();
mediasoup.observer.on('newworker', (worker) =>
  worker.observer.on('newrouter', (router) =>
    router.observer.on('newtransport', (transport) => {
      if (transport.type !== 'plain') return;
      transport.observer.on('newconsumer', (consumer) => {
        listenerConsumers.add(consumer);
        consumer.observer.once('close', () => listenerConsumers.delete(consumer));
      });
    }),
  ),
);

async function packetsSent(): Promise<number> {
  const stats = await Promise.all([...listenerConsumers].map((c) => c.getStats()));
  return stats.reduce((sum, list) => sum + list.reduce((n, s) => n + (s.type === 'outbound-rtp' ? s.packetCount : 0), 0), 0);
}

/**
 * Reading thousands of consumers' stats takes a while (seconds on a busy machine), so the packets the speakers sent
 * and the time are taken before and after, and the midpoints stand for the moment of the reading.
 */
async function forwardedSample(streams: readonly { sent(): number }[]): Promise<{ at: number; sent: number; forwarded: number }> {
  const [t0, s0] = [performance.now(), sumSent(streams)];
  const forwarded = await packetsSent();
  return { at: (t0 + performance.now()) / 2, sent: (s0 + sumSent(streams)) / 2, forwarded };
}

async function cpuTimes(pool: MediaWorkerPool): Promise<Map<number, number>> {
  return new Map((await pool.resourceUsage()).map(({ pid, usage }) => [pid, usage.ru_utime + usage.ru_stime]));
}

async function runPhase(pool: MediaWorkerPool, name: string, listeners: number, windowMs: number): Promise<PhaseResult> {
  const setupStarted = Date.now();
  const room = await RoomMedia.create({
    pool,
    roomId: `bench-${name}`,
    encryption: 'transport',
    consumerBudget: name === 'baseline' ? Number.MAX_SAFE_INTEGER : config.budget,
    expectedConsumersPerRecvTransport: config.speakers,
  });
  const senders: Socket[] = [];
  const streams: { stop(): void; sent(): number }[] = [];
  const sinks = await startSinks(listeners);
  try {
    const producerIds: string[] = [];
    for (let s = 0; s < config.speakers; s += 1) {
      const peerId = `speaker-${s}`;
      const ssrc = 10_000 + s;
      const transport = await room.createPlainTransport(peerId, 'send');
      const { id } = await room.produce(peerId, transport.id, {
        kind: 'audio',
        rtpParameters: {
          codecs: [{ mimeType: 'audio/opus', payloadType: OPUS_PAYLOAD_TYPE, clockRate: 48000, channels: 2 }],
          encodings: [{ ssrc }],
        },
        appData: { source: 'microphone' },
      });
      producerIds.push(id);
      const socket = await bindLoopback();
      senders.push(socket);
      streams.push(startRtpStream(socket, transport.port, ssrc, { intervalMs: 1000 / PACKETS_PER_SECOND }));
    }

    const join = async (l: number): Promise<void> => {
      const peerId = `listener-${l}`;
      const transport = await room.createPlainTransport(peerId, 'recv');
      await room.connectPlainTransport(peerId, transport.id, { ip: '127.0.0.1', port: sinks.ports[l]! });
      for (const producerId of producerIds) {
        const consumer = await room.consume(peerId, transport.id, producerId, room.rtpCapabilities);
        await room.resumeConsumer(peerId, consumer.id);
      }
    };
    for (let l = 0; l < listeners; l += JOIN_CONCURRENCY) {
      await Promise.all(Array.from({ length: Math.min(JOIN_CONCURRENCY, listeners - l) }, (_, i) => join(l + i)));
    }
    const setupMs = Date.now() - setupStarted;
    process.stderr.write(`bench: ${name}: ${listeners} listeners × ${config.speakers} speakers joined in ${(setupMs / 1000).toFixed(1)} s; warming up\n`);
    await sleep(config.warmupMs);

    const statsBefore = await forwardedSample(streams);
    // Answering thousands of stats requests holds the workers up; let the RTP queued meanwhile drain first.
    await sleep(SETTLE_MS);
    const before = { at: performance.now(), sent: sumSent(streams), received: sinks.received(), cpu: await cpuTimes(pool), bench: process.cpuUsage() };
    await sleep(windowMs);
    const after = { at: performance.now(), sent: sumSent(streams), received: sinks.received(), cpu: await cpuTimes(pool), bench: process.cpuUsage(before.bench) };
    const statsAfter = await forwardedSample(streams);
    const elapsedMs = after.at - before.at;
    const workerCpu = new Map([...after.cpu].map(([pid, ms]) => [pid, (ms - (before.cpu.get(pid) ?? ms)) / elapsedMs]));
    return {
      name,
      listeners,
      windowMs: elapsedMs,
      routers: room.routers(),
      workers: pool.workers(),
      offeredPps: ((after.sent - before.sent) * listeners * 1000) / elapsedMs,
      receivedPps: ((after.received - before.received) * 1000) / elapsedMs,
      forwardedPps: ((statsAfter.forwarded - statsBefore.forwarded) * 1000) / (statsAfter.at - statsBefore.at),
      forwardedShare: (statsAfter.forwarded - statsBefore.forwarded) / ((statsAfter.sent - statsBefore.sent) * listeners),
      workerCpu,
      benchCpu: (after.bench.user + after.bench.system) / 1000 / elapsedMs,
      setupMs,
    };
  } finally {
    for (const stream of streams) stream.stop();
    for (const socket of senders) socket.close();
    room.close();
    await sinks.stop();
  }
}

function sumSent(streams: readonly { sent(): number }[]): number {
  return streams.reduce((sum, s) => sum + s.sent(), 0);
}

function loss(got: number, offered: number): string {
  return `${(Math.max(0, 1 - got / offered) * 100).toFixed(2)} %`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function report(phases: readonly PhaseResult[], background: number | undefined, poolSize: number): string[] {
  const out: string[] = [''];
  out.push(
    `media stage benchmark — machine: ${availableParallelism()} cores, ` +
      `${background === undefined ? 'background load unknown' : `${percent(background)} busy before the bench started`}; ` +
      `pool: ${poolSize} mediasoup workers; ${config.speakers} speakers × ${PACKETS_PER_SECOND} packets/s (opus-sized RTP, 80-byte payload)`,
  );
  const perCpuSecond = (p: PhaseResult): number => p.forwardedPps / Math.max(1e-9, [...p.workerCpu.values()].reduce((a, b) => a + b, 0));
  const baseline = phases.find((p) => p.name === 'baseline');
  out.push('');
  out.push(
    ...table(
      ['run', 'listeners', 'consumers', 'routers', 'offered pps', 'forwarded pps', 'received pps', 'loss sfu/sink', 'worker cpu (sum)', 'fwd pkts per worker-cpu-s', 'vs baseline', 'bench cpu'],
      phases.map((p) => {
        const cpuSum = [...p.workerCpu.values()].reduce((a, b) => a + b, 0);
        return [
          p.name,
          String(p.listeners),
          count(p.routers.reduce((n, r) => n + r.consumers, 0)),
          String(p.routers.length),
          count(p.offeredPps),
          count(p.forwardedPps),
          count(p.receivedPps),
          `${loss(p.forwardedShare, 1)} / ${loss(p.receivedPps, p.offeredPps)}`,
          percent(cpuSum),
          count(perCpuSecond(p)),
          baseline ? `${round2(perCpuSecond(p) / perCpuSecond(baseline))}×` : '—',
          percent(p.benchCpu),
        ];
      }),
    ),
  );
  out.push("    consumers: every consumer on the room's routers, pipe consumers included; cpu: share of one core over the window");
  out.push('    forwarded: packets the listeners\' consumers sent (outbound RTP stats); received: packets counted at the UDP sinks');
  out.push('    loss against offered (packets the speakers sent in the window × listeners): at the SFU / at the sinks');
  for (const p of phases) {
    out.push('');
    out.push(`  ${p.name}: window ${(p.windowMs / 1000).toFixed(1)} s, setup ${(p.setupMs / 1000).toFixed(1)} s; per worker (documented capacity ≈ ${DOCUMENTED_CONSUMERS_PER_WORKER} consumers per worker):`);
    out.push(
      ...table(
        ['worker pid', 'routers', 'consumers', 'vs 500', 'producers', 'transports', 'cpu'],
        p.workers.map((w) => [
          String(w.pid),
          String(w.routers),
          count(w.consumers),
          percent(w.consumers / DOCUMENTED_CONSUMERS_PER_WORKER),
          count(w.producers),
          count(w.transports),
          percent(p.workerCpu.get(w.pid)),
        ]),
      ).map((line) => `    ${line}`),
    );
    out.push(`    routers (main first): ${p.routers.map((r) => `${r.consumers} consumers/${r.pipedProducers} piped on ${r.pid}`).join(', ')}`);
    const µs = (1e6 * [...p.workerCpu.values()].reduce((a, b) => a + b, 0)) / Math.max(1, p.forwardedPps);
    out.push(`    worker CPU per forwarded packet: ${µs.toFixed(1)} µs`);
  }
  return out;
}

async function main(): Promise<void> {
  let pool: MediaWorkerPool | undefined;
  const guard = guardBench(async () => pool?.close(), config.timeoutMs);
  try {
    const background = await sampleMachineCpu(1_000);
    pool = await MediaWorkerPool.create({ logger: pino({ level: 'warn' }) });
    const phases: PhaseResult[] = [];
    phases.push(await runPhase(pool, 'baseline', config.baselineListeners, config.baselineMs));
    phases.push(await runPhase(pool, 'stage', config.listeners, config.windowMs));
    process.stdout.write(`${report(phases, background, pool.size).join('\n')}\n`);
  } finally {
    pool?.close();
    guard.disarm();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
