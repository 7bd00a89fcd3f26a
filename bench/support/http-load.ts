import http from 'node:http';
import { LatencyRecorder, type LatencySummary } from './latency.js';

/** Called when the measured window opens and when it closes, to take CPU and memory readings at the same moments. */
export interface WindowHooks {
  opened?(): void;
  closed?(): void;
}

export interface ClosedLoopOptions {
  /** Operations kept in flight: each worker starts its next one as soon as its previous one settles. */
  readonly concurrency: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** One operation; resolves when it succeeded, rejects when it failed (the failure is counted, the loop goes on). */
  readonly op: () => Promise<void>;
  readonly hooks?: WindowHooks;
}

export interface ClosedLoopResult {
  /** Operations that completed successfully inside the window. */
  readonly ops: number;
  readonly perSec: number;
  /** Start → completion of the window's successful operations. */
  readonly latency: LatencySummary;
  /** Failed operations, warm-up included. */
  readonly failures: number;
  readonly firstFailure: string | undefined;
  readonly seconds: number;
  /** CPU of this process (the load generator) in the window, as a share of one core. */
  readonly clientCpu: number;
}

/** Closed-loop load: `concurrency` workers, a warm-up, then a fixed window in which completions are counted. */
export async function runClosedLoop(options: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const latencies = new LatencyRecorder();
  let ops = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  const start = performance.now();
  const from = start + options.warmupMs;
  const to = from + options.durationMs;
  let cpuAtOpen: NodeJS.CpuUsage | undefined;
  let clientCpu = 0;
  const openTimer = setTimeout(() => {
    cpuAtOpen = process.cpuUsage();
    options.hooks?.opened?.();
  }, options.warmupMs);
  const closeTimer = setTimeout(() => {
    const used = process.cpuUsage(cpuAtOpen);
    clientCpu = (used.user + used.system) / 1e3 / options.durationMs;
    options.hooks?.closed?.();
  }, options.warmupMs + options.durationMs);

  const worker = async (): Promise<void> => {
    while (performance.now() < to) {
      const started = performance.now();
      try {
        await options.op();
        const finished = performance.now();
        if (finished >= from && finished <= to) {
          ops++;
          latencies.record(finished - started);
        }
      } catch (error) {
        failures++;
        firstFailure ??= error instanceof Error ? error.message : String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  clearTimeout(openTimer);
  clearTimeout(closeTimer);
  const seconds = options.durationMs / 1000;
  return { ops, perSec: ops / seconds, latency: latencies.summary(), failures, firstFailure, seconds, clientCpu };
}

export interface HttpAnswer {
  readonly status: number;
  readonly body: string;
}

/**
 * HTTP/1.1 with keep-alive over node:http, at most `connections` sockets (one per closed-loop worker, so no request
 * waits for a socket). node:http rather than fetch: it costs the load generator, which shares the machine with the
 * server, a fraction of the CPU per request, and every path of a run goes through the same client.
 */
export class KeepAliveClient {
  readonly #agent: http.Agent;
  readonly #host: string;
  readonly #port: number;

  constructor(baseUrl: string, connections: number) {
    const url = new URL(baseUrl);
    this.#host = url.hostname;
    this.#port = Number(url.port);
    this.#agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  }

  request(method: string, path: string, headers: Readonly<Record<string, string>> = {}, body?: string): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: this.#host,
          port: this.#port,
          method,
          path,
          agent: this.#agent,
          headers: body === undefined ? { ...headers, 'content-length': '0' } : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
