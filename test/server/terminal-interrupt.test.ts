import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitFor } from '../support/wait.js';

/**
 * Ctrl-C in the terminal running `npm start` sends SIGINT to the whole foreground process group, and a service
 * manager stopping a unit signals every process of it: the embedded Postgres gets the signal as well as the server.
 * The server's drain (finish in-flight requests, flush commits, then stop Postgres) must still have its Postgres.
 */
const ENTRY = 'dist/test/fixtures/counter-server.js';
let dataDir: string;

test.before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'registry-interrupt-'));
  await chmod(dataDir, 0o711);
});
test.after(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

test('SIGINT to the process group (Ctrl-C) drains like SIGTERM: no request fails but as draining, exit 0, nothing alarming logged', async () => {
  // Its own process group, like a shell job: the group's id is the server's pid.
  const child = spawn(process.execPath, [path.resolve(ENTRY)], {
    env: { ...process.env, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const lines: string[] = [];
  let buffered = '';
  const onData = (d: Buffer): void => {
    buffered += d.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    lines.push(...parts);
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const listening = await waitFor(() => lines.find((l) => l.includes('"server listening"')), 'the server to listen', 60_000);
  const url = `http://127.0.0.1:${(JSON.parse(listening) as { port: number }).port}`;

  const outcomes = new Map<string, number>();
  let acked = 0;
  let running = true;
  const loops = Array.from({ length: 16 }, async (_, c) => {
    for (let i = 0; running; i++) {
      let outcome: string;
      try {
        const res = await fetch(`${url}/v1/test-counters/c-${(c + i) % 12}/add`, { method: 'POST', body: '{"amount":1}', headers: { 'content-type': 'application/json' } });
        const text = await res.text();
        outcome = res.status === 200 ? '200' : `${res.status} ${/"code":"(\w+)"/.exec(text)?.[1]}`;
        if (res.status === 200) acked++;
      } catch {
        outcome = 'connection';
        await new Promise((r) => setTimeout(r, 10));
      }
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    }
  });
  try {
    await waitFor(() => acked > 100, 'more than 100 acknowledged events', 60_000);
    process.kill(-child.pid!, 'SIGINT');
    const exit = await exited;
    running = false;
    await Promise.all(loops);
    const unexpected = [...outcomes].filter(([kind]) => !['200', 'connection', '503 server_draining'].includes(kind));
    assert.equal(unexpected, [], 'requests failed otherwise than by the drain');
    const drainedAt = lines.findIndex((l) => l.includes('"draining"'));
    const alarms = lines.slice(drainedAt).filter((l) => /"level":(40|50|60)/.test(l) && !l.includes('"status":503'));
    assert.equal(alarms.slice(0, 5), [], 'warnings or errors logged by the drain');
    assert.equal(exit, { code: 0, signal: null });
  } finally {
    running = false;
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
  }
});

test.run();
