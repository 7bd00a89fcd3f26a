import { chmod, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { processAlive, startEmbeddedPostgres, type RunningPostgres } from '../../storage/embedded-postgres.js';
import { readFile } from 'node:fs/promises';

/**
 * A postmaster left behind by a server killed with -9 whose DATA_DIR was spelled through a symlink is still this
 * cluster's: the next start, with the real path, stops it and starts, instead of taking it for a stranger, removing its
 * postmaster.pid and starting a second postmaster on the same data directory (which Postgres then refuses).
 */
let dir: string;
const running: RunningPostgres[] = [];
const log: string[] = [];
const onLog = (line: string): void => void log.push(line);

test.before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'review-orphan-'));
  await chmod(dir, 0o711); // as root, Postgres runs as `postgres` and must traverse it
});
test.after(async () => {
  for (const pg of running) await pg.stop().catch(() => {});
  await rm(dir, { recursive: true, force: true });
});

test('a postmaster left running on the same data directory, started through a symlink, is stopped by the next start', async () => {
  const real = path.join(dir, 'real');
  await mkdir(real);
  const link = path.join(dir, 'link');
  await symlink(real, link);
  // The server that was killed -9: its postmaster keeps running, started with -D <link>/pgdata.
  const orphan = await startEmbeddedPostgres({ directory: link, onLog });
  running.push(orphan);
  const orphanPid = Number((await readFile(path.join(real, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  let outcome: string;
  try {
    const next = await startEmbeddedPostgres({ directory: real, onLog });
    running.push(next);
    outcome = 'started';
  } catch (error) {
    outcome = `start failed: ${(error as Error).message}; ${log.filter((l) => /FATAL|shared memory|lock file/i.test(l)).slice(-3).join(' | ')}`;
  }
  const orphanAlive = processAlive(orphanPid);
  assert.ok(!orphanAlive && outcome === 'started', `orphan postmaster ${orphanPid} ${orphanAlive ? 'still running' : 'stopped'}; next start: ${outcome}`);
});

test.run();
