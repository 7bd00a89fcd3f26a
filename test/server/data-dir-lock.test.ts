import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitFor } from '../support/wait.js';

/**
 * One server per data directory, also when several start at the same moment (a supervisor restarting a unit while the
 * old process is still up, two terminals): exactly one gets the lock. Two holding it would each take the other's
 * embedded Postgres for an orphan and stop it.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const dirs: string[] = [];
const children: ChildProcess[] = [];

test.after(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

test('of servers starting together on one data directory, exactly one takes it', async () => {
  for (let round = 0; round < 5; round++) {
    const dir = await mkdtemp(path.join(tmpdir(), 'registry-lock-'));
    dirs.push(dir);
    const go = path.join(dir, 'go');
    const outputs: string[] = [];
    const contenders = Array.from({ length: 4 }, (_, i) => {
      const child = spawn(process.execPath, [path.join(here, 'data-dir-lock.fixture.js'), path.join(dir, 'data'), go], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      outputs[i] = '';
      child.stdout.on('data', (d: Buffer) => (outputs[i] += d.toString()));
      return child;
    });
    await waitFor(() => outputs.every((o) => o.includes('waiting')), 'every contender ready', 30_000);
    await writeFile(go, '');
    await waitFor(() => outputs.every((o) => /locked|refused/.test(o)), 'every contender done', 30_000);
    const locked = outputs.filter((o) => o.includes('locked')).length;
    for (const child of contenders) child.kill('SIGKILL');
    assert.is(locked, 1, `round ${round}: ${locked} of ${contenders.length} contenders took the data directory`);
  }
});

test('a lock left by a process that is gone is taken over; a live holder keeps it', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'registry-lock-'));
  dirs.push(dir);
  const data = path.join(dir, 'data');
  const go = path.join(dir, 'go');
  await writeFile(go, '');
  const start = (): { child: ChildProcess; output: () => string } => {
    let output = '';
    const child = spawn(process.execPath, [path.join(here, 'data-dir-lock.fixture.js'), data, go], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    return { child, output: () => output };
  };
  const first = start();
  await waitFor(() => /locked|refused/.test(first.output()), 'the first contender');
  assert.match(first.output(), 'locked');
  const second = start();
  await waitFor(() => /locked|refused/.test(second.output()), 'the second contender');
  assert.match(second.output(), new RegExp(`refused another server \\(pid ${first.child.pid}\\)`));
  // Killed -9: the lock file stays, naming a process that is gone.
  first.child.kill('SIGKILL');
  await new Promise((r) => first.child.once('exit', r));
  const third = start();
  await waitFor(() => /locked|refused/.test(third.output()), 'the third contender');
  assert.match(third.output(), 'locked');
});

test.run();
