import { accessSync, constants, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import path from 'node:path';
import { version as mediasoupVersion } from 'mediasoup';

/**
 * Which mediasoup-worker binary this node starts. npm install never fetches or builds one (package.json denies
 * mediasoup's postinstall), so it comes from one of three places, checked in the same order as
 * scripts/build-mediasoup-worker.sh checks them:
 *  - `env`: MEDIASOUP_WORKER_BIN, when set, and then nothing else (an explicit choice must not be silently replaced);
 *  - `upstream`: upstream's prebuilt location in node_modules (`npm run media:worker:prebuilt` on a machine with
 *    internet);
 *  - `cache`: the build script's Debian build, `${MEDIASOUP_WORKER_CACHE:-$HOME/.cache/registry-mediasoup}/<version>/`.
 */
export interface WorkerBinary {
  readonly source: 'env' | 'upstream' | 'cache';
  readonly path: string;
}

export const WORKER_BUILD_SCRIPT = 'scripts/build-mediasoup-worker.sh';

export class WorkerBinaryMissingError extends Error {
  readonly code = 'mediasoup_worker_missing';
  override readonly name = 'WorkerBinaryMissingError';
}

// mediasoup's entry point is <package>/node/lib/index.js; its package.json is not exported.
const mediasoupRoot = path.resolve(path.dirname(createRequire(import.meta.url).resolve('mediasoup')), '..', '..');

/** Where upstream's postinstall puts its prebuilt worker (mediasoup's own default). */
export const UPSTREAM_WORKER_BIN = path.join(mediasoupRoot, 'worker', 'out', 'Release', 'mediasoup-worker');

/** Where the build script stores the worker it built for this mediasoup version. */
export function cachedWorkerBin(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.MEDIASOUP_WORKER_CACHE || path.join(env.HOME || homedir(), '.cache', 'registry-mediasoup');
  return path.join(root, mediasoupVersion, 'mediasoup-worker');
}

export function resolveWorkerBinary(
  env: NodeJS.ProcessEnv = process.env,
  upstreamBin: string = UPSTREAM_WORKER_BIN,
): WorkerBinary {
  const explicit = env.MEDIASOUP_WORKER_BIN;
  if (explicit) {
    if (isExecutableFile(explicit)) return { source: 'env', path: explicit };
    throw new WorkerBinaryMissingError(`MEDIASOUP_WORKER_BIN=${explicit} is not an executable file; fix or unset it.`);
  }
  if (isExecutableFile(upstreamBin)) return { source: 'upstream', path: upstreamBin };
  const cached = cachedWorkerBin(env);
  if (isExecutableFile(cached)) return { source: 'cache', path: cached };
  throw new WorkerBinaryMissingError(
    `No mediasoup-worker ${mediasoupVersion} binary: none at ${upstreamBin} (upstream prebuilt) nor at ${cached} ` +
      `(Debian build cache). Build one with \`bash ${WORKER_BUILD_SCRIPT}\` (npm run media:worker), ` +
      'or set MEDIASOUP_WORKER_BIN.',
  );
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
