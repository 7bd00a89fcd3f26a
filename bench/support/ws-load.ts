import WebSocket from 'ws';
import type { WindowHooks } from './http-load.js';
import { LatencyRecorder, type LatencySummary } from './latency.js';

export interface SocketTarget {
  readonly url: string;
  readonly protocols: readonly string[];
  readonly origin?: string;
}

export interface PipelineOptions {
  readonly targets: readonly SocketTarget[];
  /** Messages kept in flight per socket: each counted reply sends the next message. */
  readonly inFlight: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /**
   * `type` of the replies that count (and release the next message); other messages are parsed and ignored. A reply
   * is matched to its message by the `ref` it echoes (the runtime socket echoes it on `presence.updated`, the echo
   * servers send the message back whole).
   */
  readonly replyType: string;
  /** Wait for a message of this type after the socket opens before sending (the runtime socket's `ready`). */
  readonly readyType?: string;
  readonly hooks?: WindowHooks;
}

export interface PipelineResult {
  readonly sockets: number;
  /** Counted replies that arrived inside the window. */
  readonly messages: number;
  readonly perSec: number;
  /** Send → counted reply, over the window's replies, each matched to its message by its echoed `ref`. */
  readonly latency: LatencySummary;
  /**
   * `error` messages, replies whose `ref` matches no message in flight, sockets that closed during the run, replies
   * that never came.
   */
  readonly failures: number;
  readonly firstFailure: string | undefined;
  /** Sockets the server closed within moments of `ready`, before any message; reopened (see `openHeld`). */
  readonly droppedAtOpen: number;
  readonly firstDrop: string | undefined;
  /** CPU of this process in the window, as a share of one core. */
  readonly clientCpu: number;
}

/** Why each socket closed once it was open: `close <code> <reason>`, after `error …` when there was one. */
const endings = new WeakMap<WebSocket, string>();

/**
 * The `presence.update` every server of the comparison receives, alternating `away` / `available` so that each one
 * changes the session actor's state; `ref` is 8 digits, so every message of a state has the same size.
 */
export function presenceMessage(sequence: number, ref: string = presenceRef(sequence)): string {
  return `{"type":"presence.update","state":"${sequence % 2 === 0 ? 'away' : 'available'}","ref":"${ref}"}`;
}

/** The `ref` of the `presence.update` with this sequence number (unique among a socket's messages in flight). */
function presenceRef(sequence: number): string {
  return String(sequence % 1e8).padStart(8, '0');
}

/**
 * Pipelined request/reply load over WebSockets with the `ws` client: every socket keeps `inFlight` messages
 * outstanding for a warm-up and a fixed window; every message received is JSON-parsed and its `type` checked, the
 * same client work whichever server answers. Replies are matched to their messages by the echoed `ref`, not by
 * arrival order: the runtime server may answer a socket's messages out of order (each waits for its own commit).
 */
export async function runPipelined(options: PipelineOptions): Promise<PipelineResult> {
  const { inFlight, replyType, readyType } = options;
  const latencies = new LatencyRecorder();
  let messages = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  const fail = (why: string): void => {
    failures++;
    firstFailure ??= why;
  };
  let from = Infinity;
  let to = Infinity;
  let ending = false;

  const held = await openHeld(options.targets, readyType, options.targets.length);
  if (held.failed > 0) throw new Error(`${held.failed} of ${options.targets.length} sockets could not be opened: ${held.firstFailure}`);
  const sockets = held.sockets.filter((ws): ws is WebSocket => ws !== undefined);
  const outstanding: Array<Promise<void>> = [];
  for (const ws of sockets) {
    /** Send time of each message in flight, by its `ref`. */
    const sentAt = new Map<string, number>();
    let sequence = 0;
    let pending = 0;
    let settle: () => void = () => {};
    outstanding.push(new Promise<void>((resolve) => (settle = resolve)));
    const send = (): void => {
      const ref = presenceRef(sequence);
      sentAt.set(ref, performance.now());
      pending++;
      ws.send(presenceMessage(sequence++, ref));
    };
    ws.on('message', (data: WebSocket.RawData) => {
      const message = JSON.parse(data.toString()) as { type?: string; ref?: string; code?: string; message?: string };
      // A refused message is answered with an error instead of its reply: it is settled (and counted as a failure).
      // The error names no ref, so the refused message's send time stays in the map, unmatched.
      const refused = message.type === 'error';
      if (refused) fail(`error message: ${message.code}: ${message.message}`);
      else if (message.type !== replyType) return;
      const now = performance.now();
      const started = refused || message.ref === undefined ? undefined : sentAt.get(message.ref);
      if (started !== undefined) sentAt.delete(message.ref!);
      else if (!refused) fail(`${replyType} with ref ${JSON.stringify(message.ref)}, which no message in flight has`);
      pending--;
      if (started !== undefined && now >= from && now <= to) {
        messages++;
        latencies.record(now - started);
      }
      if (!ending && now < to) send();
      else if (pending === 0) settle();
    });
    ws.on('close', () => {
      if (!ending) fail(`socket closed during the run: ${endings.get(ws) ?? 'unknown'}`);
      settle();
    });
    for (let i = 0; i < inFlight; i++) send();
  }

  const startedAt = performance.now();
  from = startedAt + options.warmupMs;
  to = from + options.durationMs;
  await sleep(options.warmupMs);
  const cpuAtOpen = process.cpuUsage();
  options.hooks?.opened?.();
  await sleep(Math.max(0, to - performance.now()));
  const used = process.cpuUsage(cpuAtOpen);
  options.hooks?.closed?.();
  ending = true;
  // Replies still in flight are awaited (not counted), so the next run starts on a quiet server.
  const drained = await Promise.race([Promise.all(outstanding).then(() => true), sleep(15_000).then(() => false)]);
  if (!drained) fail('replies still missing 15 s after the window closed');
  await Promise.all(sockets.map(closeSocket));
  return {
    sockets: sockets.length,
    messages,
    perSec: messages / (options.durationMs / 1000),
    latency: latencies.summary(),
    failures,
    firstFailure,
    droppedAtOpen: held.dropped,
    firstDrop: held.firstDrop,
    clientCpu: (used.user + used.system) / 1e3 / options.durationMs,
  };
}

/** How long a socket must stay open after `ready` to count as held. */
const SETTLE_MS = 100;

export interface HeldSockets {
  /** In the order of the targets; undefined where the target could not be opened. */
  readonly sockets: ReadonlyArray<WebSocket | undefined>;
  readonly opened: number;
  readonly failed: number;
  readonly firstFailure: string | undefined;
  readonly dropped: number;
  readonly firstDrop: string | undefined;
}

/**
 * Opens every target (`concurrency` upgrades at a time), waits `SETTLE_MS`, and reopens any socket the server closed
 * in between (up to three more rounds), counting those as dropped at open. Such drops are a server defect the report
 * names; reopening keeps them from skewing the measurement that follows.
 */
export async function openHeld(targets: readonly SocketTarget[], readyType: string | undefined, concurrency: number): Promise<HeldSockets> {
  const sockets = new Array<WebSocket | undefined>(targets.length);
  let failed = 0;
  let firstFailure: string | undefined;
  let dropped = 0;
  let firstDrop: string | undefined;
  let todo = targets.map((_, i) => i);
  for (let round = 0; round < 4 && todo.length > 0; round++) {
    let next = 0;
    const batch = todo;
    await Promise.all(
      Array.from({ length: Math.max(1, Math.min(concurrency, batch.length)) }, async () => {
        while (next < batch.length) {
          const i = batch[next++]!;
          try {
            sockets[i] = await openSocket(targets[i]!, readyType);
          } catch (error) {
            sockets[i] = undefined;
            failed++;
            firstFailure ??= error instanceof Error ? error.message : String(error);
          }
        }
      }),
    );
    await sleep(SETTLE_MS);
    todo = batch.filter((i) => sockets[i] !== undefined && sockets[i].readyState !== WebSocket.OPEN);
    dropped += todo.length;
    for (const i of todo) firstDrop ??= endings.get(sockets[i]!);
  }
  for (const i of todo) sockets[i] = undefined;
  failed += todo.length;
  return { sockets, opened: sockets.filter((ws) => ws !== undefined).length, failed, firstFailure: firstFailure ?? (todo.length ? `dropped at open four times: ${firstDrop}` : undefined), dropped, firstDrop };
}

/** Opens one socket (and waits for `readyType` when given); rejects with the status and body of a refused upgrade. */
export function openSocket(target: SocketTarget, readyType?: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(target.url, [...target.protocols], {
      perMessageDeflate: false,
      ...(target.origin ? { origin: target.origin } : {}),
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
    });
    ws.once('error', reject);
    ws.once('close', (code, reason) => reject(new Error(`closed before ready: ${code} ${reason.toString()}`)));
    const ready = (): void => {
      // From here a failure shows as a close, which the caller watches; an unheard 'error' would crash the process.
      ws.on('error', (error) => endings.set(ws, `error ${error.message}`));
      ws.on('close', (code, reason) => {
        const prior = endings.get(ws);
        endings.set(ws, `${prior ? `${prior}; ` : ''}close ${code} ${reason.toString()}`.trim());
      });
      resolve(ws);
    };
    if (!readyType) {
      ws.once('open', ready);
      return;
    }
    const onMessage = (data: WebSocket.RawData): void => {
      if ((JSON.parse(data.toString()) as { type?: string }).type !== readyType) return;
      ws.off('message', onMessage);
      ready();
    };
    ws.on('message', onMessage);
  });
}

export function closeSocket(ws: WebSocket): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      ws.terminate();
      resolve();
    }, 5_000);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    ws.close(1000, 'bench over');
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
