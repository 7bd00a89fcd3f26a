import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres, type RunningPostgres } from '../storage/embedded-postgres.js';

/**
 * Runs every compiled `*.test.js` as its own process (uvu suites, a fresh database each) and ends with the one line
 * CI reads: `N passed, N failed`. Postgres is the embedded one unless TEST_DATABASE_URL names another cluster.
 *
 * Usage: node dist/test/run.js [substring …]   (only files whose path contains one of the substrings)
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const FILE_TIMEOUT_MS = 10 * 60_000;
const CONCURRENCY = Number(process.env.TEST_CONCURRENCY ?? 2);

interface FileResult {
  readonly file: string;
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly output: string;
  readonly ms: number;
}

async function findTests(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await findTests(full)));
    else if (entry.name.endsWith('.test.js')) out.push(full);
  }
  return out.sort();
}

function runFile(file: string, env: NodeJS.ProcessEnv): Promise<FileResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--enable-source-maps', file], {
      env: { ...env, NODE_DISABLE_COLORS: '1', FORCE_COLOR: '0', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      output += `\n[runner] ${path.basename(file)} exceeded ${FILE_TIMEOUT_MS / 1000} s and was killed\n`;
      child.kill('SIGKILL');
    }, FILE_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      // eslint-disable-next-line no-control-regex
      const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
      const total = Number(/Total:\s+(\d+)/.exec(plain)?.[1] ?? NaN);
      const passed = Number(/Passed:\s+(\d+)/.exec(plain)?.[1] ?? 0);
      const skipped = Number(/Skipped:\s+(\d+)/.exec(plain)?.[1] ?? 0);
      let failed = Number.isNaN(total) ? 0 : total - passed - skipped;
      // A file that crashed or exited non-zero without reporting a failure still failed.
      if ((code !== 0 || Number.isNaN(total)) && failed === 0) failed = 1;
      resolve({ file, passed, failed, skipped, output: plain, ms: Date.now() - started });
    });
  });
}

async function main(): Promise<void> {
  const filters = process.argv.slice(2);
  const files = (await findTests(here)).filter(
    (f) => filters.length === 0 || filters.some((s) => path.relative(here, f).includes(s)),
  );
  let postgres: RunningPostgres | undefined;
  let pgDir: string | undefined;
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (!env.TEST_DATABASE_URL) {
    pgDir = await mkdtemp(path.join(tmpdir(), 'registry-test-pg-'));
    postgres = await startEmbeddedPostgres({ directory: pgDir });
    env.TEST_DATABASE_URL = postgres.connectionString;
  }
  const results: FileResult[] = [];
  const queue = [...files];
  const worker = async (): Promise<void> => {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const result = await runFile(file, env);
      results.push(result);
      const name = path.relative(here, file);
      const verdict = result.failed > 0 ? 'FAIL' : 'ok  ';
      process.stdout.write(`${verdict} ${name} (${result.passed} passed, ${result.failed} failed, ${result.ms} ms)\n`);
      if (result.failed > 0 || process.env.TEST_VERBOSE) process.stdout.write(indent(result.output));
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, CONCURRENCY) }, worker));
  } finally {
    await postgres?.stop();
    if (pgDir) await rm(pgDir, { recursive: true, force: true });
  }
  const passed = results.reduce((n, r) => n + r.passed, 0);
  const failed = results.reduce((n, r) => n + r.failed, 0);
  if (files.length === 0) process.stdout.write('no test files matched\n');
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  process.exitCode = failed > 0 || files.length === 0 ? 1 : 0;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n')
    .concat('\n');
}

await main();
