import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { processRuns } from '../storage/embedded-postgres.js';

/**
 * One server per data directory. A server killed with -9 leaves its embedded Postgres running, and the next start
 * takes that Postgres over; without this lock the same takeover would also pull the database from under a server
 * that is still running. The lock is the server's pid in `server.pid`: a start refuses while that process lives and
 * is a Node process (a pid reused by something else after a reboot does not block), and takes the lock otherwise.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
  const file = path.join(dataDir, 'server.pid');
  const holder = Number((await readFile(file, 'utf8').catch(() => '')).trim());
  if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && (await isNodeProcess(holder))) {
    throw new Error(`another server (pid ${holder}) is running on the data directory ${path.resolve(dataDir)}; stop it first, or give this one its own DATA_DIR`);
  }
  await writeFile(file, `${process.pid}\n`);
  return async () => {
    const current = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (current === process.pid) await rm(file, { force: true });
  };
}

function isNodeProcess(pid: number): Promise<boolean> {
  return processRuns(pid, ([program = '']) => program === process.execPath || /(^|\/)node(js)?$/.test(program));
}
