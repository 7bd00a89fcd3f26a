import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { Test } from 'uvu';
import { resolveWorkerBinary } from '../../media/worker-binary.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import { createTestDatabase, type TestDatabase } from './database.js';

/**
 * A mediasoup-worker binary whose start fails at will: a shell script (the pool's `workerBin`) that exits 1 while its
 * `refuse` file exists, and otherwise becomes the real worker (`exec`, same pid, same inherited channel pipes). So a
 * pool's spawn of a worker really fails, as a spawn the system refuses for a moment does, with no mediasoup mocked.
 */
export interface FailingWorkerSpawn {
  readonly workerBin: string;
  /** Every start from now on fails. */
  refuse(): Promise<void>;
  /** Starts succeed again. */
  allow(): Promise<void>;
  remove(): Promise<void>;
}

export async function failingWorkerSpawn(): Promise<FailingWorkerSpawn> {
  const dir = await mkdtemp(path.join(tmpdir(), 'worker-spawn-'));
  const refuseFile = path.join(dir, 'refuse');
  const workerBin = path.join(dir, 'mediasoup-worker');
  const quote = (s: string): string => `'${s.replaceAll("'", "'\\''")}'`;
  await writeFile(workerBin, `#!/bin/sh\n[ -e ${quote(refuseFile)} ] && exit 1\nexec ${quote(resolveWorkerBinary().path)} "$@"\n`);
  await chmod(workerBin, 0o755);
  return {
    workerBin,
    refuse: () => writeFile(refuseFile, ''),
    allow: () => rm(refuseFile, { force: true }),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Gives a suite a test database and a one-worker pool whose worker starts through a `failingWorkerSpawn` (handed to
 * `opened` before the first test), and removes all three after the last.
 */
export function withFailingWorkerPool(suite: Test, opened: (started: { db: TestDatabase; spawn: FailingWorkerSpawn; pool: MediaWorkerPool }) => void): void {
  let db: TestDatabase | undefined;
  let spawn: FailingWorkerSpawn | undefined;
  let pool: MediaWorkerPool | undefined;
  suite.before(async () => {
    db = await createTestDatabase();
    spawn = await failingWorkerSpawn();
    pool = await MediaWorkerPool.create({ size: 1, logger: pino({ level: 'silent' }), workerBin: spawn.workerBin });
    opened({ db, spawn, pool });
  });
  suite.after(async () => {
    pool?.close();
    await spawn?.remove();
    await db?.drop();
  });
}
