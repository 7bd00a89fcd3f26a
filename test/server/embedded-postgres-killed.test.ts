import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { isAlive, spawnServer } from '../support/process.js';
import { waitFor } from '../support/wait.js';

/**
 * The server runs its embedded Postgres and nobody else does: when that Postgres exits without being asked (killed,
 * crashed, ended by the OOM killer), the server starts it again on the same directory and port, and serves again
 * without being restarted itself. Before, it answered 503 until an operator restarted the server.
 */
const ENTRY = 'dist/test/fixtures/counter-server.js';
let dataDir: string;

async function postmasterOf(): Promise<number> {
  return Number((await readFile(path.join(dataDir, 'postgres', 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

test.before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'registry-embedded-killed-'));
  // Postgres runs as its own user when tests run as root: the data directory must let it through.
  await chmod(dataDir, 0o711);
});
test.after(async () => {
  const left = await postmasterOf().catch(() => undefined);
  if (left !== undefined && isAlive(left)) process.kill(left, 'SIGINT');
  if (left !== undefined) await waitFor(() => !isAlive(left), 'the postmaster to stop', 15_000).catch(() => {});
  await rm(dataDir, { recursive: true, force: true });
});

test('the embedded Postgres killed under a running server is started again; what was stored is served, new writes land', async () => {
  const server = await spawnServer(ENTRY, { DATA_DIR: dataDir });
  const add = (amount: number) =>
    fetch(`${server.url}/v1/test-counters/survivor/add`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount }) });
  let restarted = 0;
  try {
    assert.is((await add(1)).status, 200);
    const killed = await postmasterOf();
    process.kill(killed, 'SIGKILL');
    await waitFor(() => !isAlive(killed), 'the postmaster to die');
    const during = await add(10);
    assert.is(during.status, 503, await during.clone().text());
    const served = await waitFor(
      async () => {
        const res = await add(100);
        return res.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
      },
      'the server to serve again with its Postgres started again',
      30_000,
    );
    assert.is(served.total, 101, JSON.stringify(served));
    restarted = await postmasterOf();
    assert.ok(restarted !== killed && isAlive(restarted), 'a new postmaster');
    assert.is((await fetch(`${server.url}/ready`)).status, 200);
    assert.ok(server.lines.some((l) => l.includes('embedded Postgres started again')), server.lines.slice(-5).join('\n'));
  } finally {
    server.child.kill('SIGTERM');
    const exit = await server.exited;
    assert.is(exit.code, 0, server.lines.slice(-5).join('\n'));
  }
  await waitFor(() => !isAlive(restarted), 'the restarted Postgres to stop with its server', 15_000);
});

test.run();
