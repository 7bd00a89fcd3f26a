import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { isAlive, spawnServer } from '../support/process.js';
import { waitFor } from '../support/wait.js';

/**
 * The embedded Postgres is a child of the server: however the server process ends short of kill -9 (a second signal
 * that skips the drain), its Postgres does not keep running behind it.
 */
const ENTRY = 'dist/test/fixtures/counter-server.js';
const dirs: string[] = [];
const strays: number[] = [];

async function freshDataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'registry-orphans-'));
  // Postgres runs as its own user when tests run as root: the data directory must let it through.
  await chmod(dir, 0o711);
  dirs.push(dir);
  return dir;
}

async function postmasterOf(dataDir: string): Promise<number> {
  return Number((await readFile(path.join(dataDir, 'postgres', 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

/** Whether `pid` has ended within `ms` (Postgres's fast shutdown takes a moment). */
async function endsWithin(pid: number, ms: number): Promise<boolean> {
  return waitFor(() => !isAlive(pid), `pid ${pid} to end`, ms).then(
    () => true,
    () => false,
  );
}

test.after(async () => {
  // A failed test leaves the Postgres it found running: stop it before removing its directory.
  for (const pid of strays) if (isAlive(pid)) process.kill(pid, 'SIGINT');
  for (const pid of strays) await endsWithin(pid, 15_000);
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

test('a second signal exits at once, and the embedded Postgres goes with the server', async () => {
  const dataDir = await freshDataDir();
  const server = await spawnServer(ENTRY, { DATA_DIR: dataDir });
  const postmaster = await postmasterOf(dataDir);
  strays.push(postmaster);
  assert.ok(isAlive(postmaster));
  // Two different signals, so the second is not merged into the first while it is pending: the impatient operator.
  server.child.kill('SIGTERM');
  server.child.kill('SIGINT');
  const exit = await server.exited;
  assert.is.not(exit.code, 0, 'the second signal did not skip the drain');
  assert.ok(await endsWithin(postmaster, 15_000), `the embedded Postgres (pid ${postmaster}) outlived its server`);
});

test.run();
