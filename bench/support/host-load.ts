import type { ActorHost, HostObserver } from '../../actors/actor-host.js';
import { MachineCpu } from './cpu.js';
import { LatencyRecorder, type LatencySummary } from './latency.js';

const ADD = Object.freeze({ type: 'tally.add', amount: 1 });

/** What BatchStats has counted so far. */
export interface BatchTotals {
  readonly batches: number;
  /** Entries, one per actor per batch: each is one journal row. */
  readonly actors: number;
  readonly events: number;
  /** Entries that also stored their actor's snapshot. */
  readonly snapshots: number;
  readonly commitMs: number;
}

/** Counts the host's commits, so the report can say how the group commit actually batched. */
export class BatchStats implements HostObserver {
  batches = 0;
  actors = 0;
  events = 0;
  snapshots = 0;
  commitMs = 0;
  failedBatches = 0;
  activations = 0;

  reset(): void {
    this.batches = this.actors = this.events = this.snapshots = this.commitMs = this.failedBatches = 0;
  }

  totals(): BatchTotals {
    const { batches, actors, events, snapshots, commitMs } = this;
    return { batches, actors, events, snapshots, commitMs };
  }

  batchCommitted(actors: number, events: number, durationMs: number, snapshots: number): void {
    this.batches++;
    this.actors += actors;
    this.events += events;
    this.snapshots += snapshots;
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
  /**
   * `round-robin` walks the keys in order (used to activate every actor once); `random` picks uniformly; `sequence`
   * sends one event to each key index of the list, in its order, and then stops.
   */
  readonly pick: 'random' | 'round-robin' | { readonly sequence: readonly number[] };
  /** Stop after this many sends in total (round-robin warm-up), whatever the duration. */
  readonly maxEvents?: number;
  /** Called once when the window closes (or when the load ended before it), before stragglers' replies arrive. */
  readonly onWindowClosed?: () => void;
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
  const sequence = typeof pick === 'object' ? pick.sequence : undefined;
  const maxEvents = Math.min(options.maxEvents ?? Infinity, sequence?.length ?? Infinity);
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
      const index = sequence
        ? sequence[cursor++]!
        : keys.length === 1
          ? 0
          : pick === 'random'
            ? Math.floor(Math.random() * keys.length)
            : cursor++ % keys.length;
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
  const close = (): void => {
    if (atEnd) return;
    atEnd = { process: process.cpuUsage(cpuBefore), machine: machine.share() };
    options.onWindowClosed?.();
  };
  const endTimer = setTimeout(close, durationMs);
  await Promise.all(Array.from({ length: senders }, sender));
  clearTimeout(endTimer);
  // A bounded warm-up may end before the window does (and one commit may answer every sender before the timer runs).
  close();
  // A bounded warm-up's rate is over the time it really took.
  const seconds = (Math.min(to, performance.now()) - from) / 1000;
  const cpu = atEnd!.process;
  return {
    events: inWindow,
    eventsPerSec: inWindow / seconds,
    failures,
    firstFailure,
    latency: latencies.summary(),
    seconds,
    processCpu: (cpu.user + cpu.system) / 1e6 / seconds,
    machineCpu: atEnd!.machine,
  };
}
