import { link, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { processRuns } from '../storage/embedded-postgres.js';

/**
 * One server per data directory. A server killed with -9 leaves its embedded Postgres running, and the next start
 * takes that Postgres over; without this lock the same takeover would also pull the database from under a server
 * that is still running. The lock is the server's pid in `server.pid`: a start refuses while that process lives and
 * is a Node process (a pid reused by something else after a reboot does not block), and takes the lock otherwise.
 *
 * Taking it is atomic: the file is linked into place complete (link fails when the name exists), never read and then
 * written, so of several servers starting at the same moment one gets it and the others refuse. (Read-then-write let
 * two of them both see no holder, both write, and both run, each stopping the other's Postgres as an orphan.)
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
  const file = path.join(dataDir, 'server.pid');
  const mine = `${file}.${process.pid}`;
  await writeFile(mine, `${process.pid}\n`);
  try {
    for (let attempt = 0; ; attempt++) {
      if (await linked(mine, file)) break;
      const seen = await readFile(file, 'utf8').catch(() => undefined);
      if (seen === undefined) continue; // released in between: try again
      const holder = Number(seen.trim());
      if (holder === process.pid) break;
      if (Number.isInteger(holder) && holder > 0 && (await isNodeProcess(holder))) {
        throw new Error(`another server (pid ${holder}) is running on the data directory ${path.resolve(dataDir)}; stop it first, or give this one its own DATA_DIR`);
      }
      if (attempt >= 10) throw new Error(`could not take the lock ${file}: other servers keep starting on this data directory`);
      // Left by a process that is gone. Moved aside atomically under a name of this process, then checked to be the
      // stale lock that was read: a contender may have replaced it meanwhile, and its live lock is put back.
      const aside = `${file}.${process.pid}.stale`;
      const moved = await rename(file, aside).then(
        () => readFile(aside, 'utf8'),
        () => undefined,
      );
      if (moved !== undefined && moved !== seen) await linked(aside, file);
      await rm(aside, { force: true });
    }
  } finally {
    await rm(mine, { force: true });
  }
  return async () => {
    const current = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (current === process.pid) await rm(file, { force: true });
  };
}

/** Links `from` as `to` unless `to` exists (the atomic test-and-set of the lock). */
async function linked(from: string, to: string): Promise<boolean> {
  try {
    await link(from, to);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

function isNodeProcess(pid: number): Promise<boolean> {
  return processRuns(pid, ([program = '']) => program === process.execPath || /(^|\/)node(js)?$/.test(program));
}
