import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

export interface LintReport {
  readonly totals: { readonly errors: number; readonly warnings: number };
  readonly problems: ReadonlyArray<{ readonly message: string; readonly ruleId: string }>;
}

/** `redocly lint` (the devDependency, offline) of an OpenAPI document's exact text, with the project's redocly.yaml. */
export async function redoclyLint(text: string): Promise<LintReport> {
  const dir = await mkdtemp(path.join(tmpdir(), 'openapi-'));
  try {
    const file = path.join(dir, 'openapi.json');
    await writeFile(file, text);
    const { stdout } = await promisify(execFile)(path.resolve('node_modules/.bin/redocly'), ['lint', file, '--format', 'json', '--config', path.resolve('redocly.yaml')], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    }).catch((e: { stdout: string }) => e);
    return JSON.parse(stdout) as LintReport;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
