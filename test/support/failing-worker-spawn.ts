import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { resolveWorkerBinary } from '../../media/worker-binary.js';

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
