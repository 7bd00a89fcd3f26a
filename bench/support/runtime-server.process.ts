/**
 * The server under test for bench/runtime.bench.ts, in a process of its own: the real server (`startServer` with the
 * product's parts, as `server/main.ts` runs it) plus a few bench-only requests over IPC: making principals (see
 * runtime-fixture.ts), reporting memory after a forced GC, and CPU-profiling a window of its own event loop.
 *
 * argv[2]: the server's environment (DATABASE_URL, the RUNTIME_* knobs, …) as JSON; nothing else is read.
 * Started with --expose-gc so `memory` can collect before it reports, and with `npm start`'s --max-semi-space-size.
 */
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../server/logger.js';
import { productParts } from '../../server/main.js';
import { startServer } from '../../server/server.js';
import { serveParent } from './bench-child.js';
import { summariseProfile, type ProfileSummary } from './cpu-profile.js';
import { RuntimeFixture, type BenchEnvironment, type BenchPrincipal } from './runtime-fixture.js';

export interface MemoryReport {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
}

export type RuntimeServerProtocol = {
  environment: { request: { environmentId: string }; result: BenchEnvironment };
  principals: { request: { environment: BenchEnvironment; handles: readonly string[]; concurrency: number }; result: BenchPrincipal[] };
  memory: { request: { gc: boolean }; result: MemoryReport };
  'profile.start': { request: null; result: null };
  'profile.stop': { request: { path: string; top: number }; result: ProfileSummary };
};

export interface RuntimeServerInfo {
  readonly port: number;
  readonly opsPort: number;
}

const env = JSON.parse(process.argv[2] ?? '{}') as Record<string, string>;
const config = loadConfig({ PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...env });
const server = await startServer(config, productParts, { logger: createLogger(config.logLevel) });
const fixture = await RuntimeFixture.create(server.services);
let profiler: Session | undefined;

serveParent<RuntimeServerProtocol>(
  {
    environment: ({ environmentId }) => fixture.environment(environmentId),
    principals: ({ environment, handles, concurrency }) => fixture.principals(environment, handles, concurrency),
    memory: async ({ gc }) => {
      if (gc && globalThis.gc) {
        // Twice: the first pass finalises what the second frees.
        globalThis.gc();
        await new Promise((resolve) => setImmediate(resolve));
        globalThis.gc();
      }
      const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
      return { rss, heapUsed, external, arrayBuffers };
    },
    'profile.start': async () => {
      profiler = new Session();
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
      await profiler.post('Profiler.start');
      return null;
    },
    'profile.stop': async ({ path, top }) => {
      if (!profiler) throw new Error('no profile running');
      const { profile } = await profiler.post('Profiler.stop');
      profiler.disconnect();
      profiler = undefined;
      await writeFile(path, JSON.stringify(profile));
      return summariseProfile(profile, top);
    },
  },
  { port: server.port, opsPort: server.opsPort } satisfies RuntimeServerInfo,
  () => server.stop('bench over'),
);
