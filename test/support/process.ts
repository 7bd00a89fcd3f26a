import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly opsUrl: string;
  /** Every log line printed so far (JSON lines parsed when possible). */
  readonly lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts a compiled server entry point as its own process and resolves once it logs that it listens. */
export function spawnServer(entry: string, env: Record<string, string>, timeoutMs = 60_000): Promise<ServerProcess> {
  const child = spawn(process.execPath, [path.resolve(entry)], {
    env: { ...process.env, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in ${timeoutMs} ms:\n${lines.join('\n')}`)), timeoutMs);
    let buffered = '';
    const onData = (data: Buffer): void => {
      buffered += data.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const line of parts) {
        lines.push(line);
        if (line.includes('"server listening"')) {
          const entry = JSON.parse(line) as { port: number; opsPort: number };
          clearTimeout(timer);
          resolve({ child, url: `http://127.0.0.1:${entry.port}`, opsUrl: `http://127.0.0.1:${entry.opsPort}`, lines, exited });
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening:\n${lines.join('\n')}${buffered}`));
    });
  });
}

/** Runs an entry point to completion, for start-up refusals. */
export function runToExit(entry: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.resolve(entry)], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

export { processAlive as isAlive } from '../../storage/embedded-postgres.js';

/**
 * Runs the compiled operators' command line (`registry-admin`) against an operator listener, as `operator`, with
 * nothing of this process's environment but PATH and `env`: its exit code and both streams, a failure included.
 */
export async function runRegistryAdmin(
  opsUrl: string,
  operator: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const cli = [path.resolve('dist/bin/registry-admin.js'), '--ops-url', opsUrl, '--as', operator, ...args];
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, cli, { env: { PATH: process.env.PATH ?? '', ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
