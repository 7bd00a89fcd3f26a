import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { isAlive, spawnServer } from '../support/process.js';
import { waitFor } from '../support/wait.js';

/**
 * The embedded Postgres is a child of the server: however the server process ends short of kill -9 (a second signal
 * that skips the drain, a signal while it is still starting), its Postgres does not keep running behind it.
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

test('a signal while the server is still starting stops it, and its embedded Postgres with it', async () => {
  const dataDir = await freshDataDir();
  const child = spawn(process.execPath, [path.resolve(ENTRY)], {
    env: { ...process.env, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  // Postgres is up, the rest of the start (migrations, features, listeners) is still to come: a deploy stops it here.
  await waitFor(() => output.includes('"embedded Postgres started"'), 'the embedded Postgres to start', 60_000);
  const postmaster = await postmasterOf(dataDir);
  strays.push(postmaster);
  child.kill('SIGTERM');
  const exit = await exited;
  assert.ok(await endsWithin(postmaster, 15_000), `the embedded Postgres (pid ${postmaster}) outlived its server (exit ${JSON.stringify(exit)})`);
  assert.equal(exit, { code: 0, signal: null }, `a stop asked for during the start is a clean stop:\n${output.slice(-2000)}`);
});

test.run();
