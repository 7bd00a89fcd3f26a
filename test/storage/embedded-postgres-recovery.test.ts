import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { processAlive, startEmbeddedPostgres, type RunningPostgres } from '../../storage/embedded-postgres.js';

/**
 * The embedded Postgres restarting on a data directory left behind by an unclean end: a stale lock file whose pid
 * was reused, a first start killed during initdb, a postmaster that died before stop(), a port in use. Each test runs
 * its own cluster in its own directory (never the runner's).
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dirs: string[] = [];
const log: string[] = [];
const onLog = (line: string): void => {
  log.push(line);
  if (log.length > 50) log.shift();
};

async function freshDir(): Promise<string> {
  log.length = 0;
  const dir = await mkdtemp(path.join(tmpdir(), 'registry-embedded-pg-'));
  dirs.push(dir);
  return dir;
}

test.after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const postmasterPid = async (dir: string): Promise<number> =>
  Number((await readFile(path.join(dir, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);

/** Whether initdb has begun writing a cluster anywhere in the directory (it writes PG_VERSION first). */
async function initdbBegun(dir: string): Promise<boolean> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries.some((e) => e.isDirectory() && existsSync(path.join(dir, e.name, 'PG_VERSION')));
}

test('a stale postmaster.pid naming an unrelated live process: the start leaves that process alone', async () => {
  const dir = await freshDir();
  const first = await startEmbeddedPostgres({ directory: dir, onLog });
  const pidFile = path.join(dir, 'pgdata', 'postmaster.pid');
  const content = await readFile(pidFile, 'utf8');
  await first.stop();
  // What an unclean end leaves (the file of a postmaster that is gone), its pid now reused by an unrelated process.
  const bystander = spawn('sleep', ['120'], { stdio: 'ignore' });
  let ended: string | undefined;
  bystander.on('exit', (code, signal) => (ended = signal ?? String(code)));
  await writeFile(pidFile, content.replace(/^\d+/, String(bystander.pid)));
  try {
    const second = await startEmbeddedPostgres({ directory: dir, onLog });
    await second.stop();
    await sleep(200);
    assert.ok(processAlive(bystander.pid!) && ended === undefined, `the unrelated process (pid ${bystander.pid}) ended: ${ended}`);
  } finally {
    bystander.kill('SIGKILL');
  }
});

test('a first start killed during initdb: the next start on the same directory comes up', async () => {
  const dir = await freshDir();
  const child = spawn(process.execPath, [path.join(here, 'embedded-start.fixture.js'), dir], { detached: true, stdio: 'ignore' });
  const deadline = Date.now() + 60_000;
  while (!(await initdbBegun(dir))) {
    if (Date.now() > deadline) assert.unreachable('initdb never wrote PG_VERSION');
    await sleep(5);
  }
  // The whole process group, initdb included: `docker kill`, a systemd stop timeout, an OOM kill of the cgroup.
  process.kill(-child.pid!, 'SIGKILL');
  await sleep(500);
  let postgres: RunningPostgres | undefined;
  try {
    postgres = await startEmbeddedPostgres({ directory: dir, onLog });
  } catch (error) {
    assert.unreachable(`${error instanceof Error ? error.message : String(error)}\n${log.slice(-4).join('\n')}`);
  } finally {
    await postgres?.stop();
  }
});

test('stop() settles when the postmaster has already died', async () => {
  const dir = await freshDir();
  const postgres = await startEmbeddedPostgres({ directory: dir, onLog });
  const pid = await postmasterPid(dir);
  process.kill(pid, 'SIGKILL');
  while (processAlive(pid)) await sleep(20);
  await sleep(200);
  const outcome = await Promise.race([postgres.stop().then(() => 'stopped'), sleep(5_000).then(() => 'still pending after 5 s')]);
  assert.is(outcome, 'stopped');
});

test('a port in use refuses the start promptly; the same directory then starts on a free port', async () => {
  const dir = await freshDir();
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = (holder.address() as { port: number }).port;
  try {
    const started = Date.now();
    let error: unknown;
    try {
      await (await startEmbeddedPostgres({ directory: dir, port, onLog })).stop();
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof Error && /did not start/.test(error.message), 'refused');
    assert.ok(Date.now() - started < 15_000, `took ${Date.now() - started} ms`);
  } finally {
    holder.close();
  }
  const again = await startEmbeddedPostgres({ directory: dir, onLog });
  await again.stop();
});

test.run();
