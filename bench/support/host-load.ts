import type { ActorHost, HostObserver } from '../../actors/actor-host.js';
import { MachineCpu } from './cpu.js';
import { LatencyRecorder, type LatencySummary } from './latency.js';

const ADD = Object.freeze({ type: 'tally.add', amount: 1 });

/** Counts the host's commits, so the report can say how the group commit actually batched. */
export class BatchStats implements HostObserver {
  batches = 0;
  actors = 0;
  events = 0;
  commitMs = 0;
  failedBatches = 0;
  activations = 0;

  reset(): void {
    this.batches = this.actors = this.events = this.commitMs = this.failedBatches = 0;
  }

  batchCommitted(actors: number, events: number, durationMs: number): void {
    this.batches++;
    this.actors += actors;
    this.events += events;
    this.commitMs += durationMs;
  }
  batchFailed(): void {
    this.failedBatches++;
  }
  activated(): void {
    this.activations++;
  }
  deactivated(): void {}
  eventAccepted(): void {}
}

export interface LoadOptions {
  readonly host: ActorHost;
  readonly kind: string;
  readonly keys: readonly string[];
  /** Closed loop: each sender sends its next event as soon as the previous one is replied to. */
  readonly senders: number;
  readonly durationMs: number;
  /** `round-robin` walks the keys in order (used to activate every actor once); `random` picks uniformly. */
  readonly pick: 'random' | 'round-robin';
  /** Stop after this many sends in total (round-robin warm-up), whatever the duration. */
  readonly maxEvents?: number;
}

export interface LoadResult {
  /** Replies that arrived inside the measured window. */
  readonly events: number;
  readonly eventsPerSec: number;
  readonly failures: number;
  readonly firstFailure: string | undefined;
  /** Send → reply of every event sent inside the window. */
  readonly latency: LatencySummary;
  readonly seconds: number;
  /** Share of one core the bench process (host + pg client) used, and of the whole machine (every process). */
  readonly processCpu: number;
  readonly machineCpu: number | undefined;
}

/** Drives `senders` closed-loop senders against the host and measures reply latency and committed events/s. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { host, kind, keys, senders, durationMs, pick } = options;
  const latencies = new LatencyRecorder();
  const maxEvents = options.maxEvents ?? Infinity;
  let sent = 0;
  let cursor = 0;
  let inWindow = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  const cpuBefore = process.cpuUsage();
  const machine = MachineCpu.start();
  const from = performance.now();
  const to = from + durationMs;

  const sender = async (): Promise<void> => {
    while (sent < maxEvents && performance.now() < to) {
      sent++;
      const index = keys.length === 1 ? 0 : pick === 'random' ? Math.floor(Math.random() * keys.length) : cursor++ % keys.length;
      const started = performance.now();
      try {
        await host.send(kind, keys[index]!, ADD);
        const finished = performance.now();
        latencies.record(finished - started);
        if (finished <= to) inWindow++;
      } catch (error) {
        failures++;
        firstFailure ??= error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      }
    }
  };
  // CPU is read when the window closes, not when the last straggler's reply arrives.
  let atEnd: { process: NodeJS.CpuUsage; machine: number | undefined } | undefined;
  const endTimer = setTimeout(() => (atEnd = { process: process.cpuUsage(cpuBefore), machine: machine.share() }), durationMs);
  await Promise.all(Array.from({ length: senders }, sender));
  clearTimeout(endTimer);
  // A bounded warm-up may end before the window does: its rate is over the time it really took.
  const seconds = (Math.min(to, performance.now()) - from) / 1000;
  const cpu = atEnd?.process ?? process.cpuUsage(cpuBefore);
  return {
    events: inWindow,
    eventsPerSec: inWindow / seconds,
    failures,
    firstFailure,
    latency: latencies.summary(),
    seconds,
    processCpu: (cpu.user + cpu.system) / 1e6 / seconds,
    machineCpu: atEnd ? atEnd.machine : machine.share(),
  };
}
