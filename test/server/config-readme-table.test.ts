import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '../../server/config.js';

/**
 * README.md's Configuration table is the newcomer's list of settings: it names every variable the server reads, no
 * other, and each default it writes as a plain value is the one the server uses.
 */
const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const section = README.split('\n## Configuration\n')[1]?.split('\n## ')[0] ?? '';
const rows = [...section.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]*) \|/gm)].map(([, name, cell]) => ({ name: name!, cell: cell!.trim() }));

function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return 'accepted';
}

test('the table lists exactly the variables the configuration reads', () => {
  assert.ok(rows.length > 0, 'no table rows found under ## Configuration');
  assert.equal(rows.map((r) => r.name).sort(), [...CONFIG_VARIABLES].sort());
});

test('every variable in the table is read: an empty value is refused, naming it', () => {
  for (const { name } of rows) assert.match(refusal({ [name]: '' }), new RegExp(`invalid configuration: ${name}: `), name);
});

test('a default written as one value in the table is the default the server uses', () => {
  const defaults = loadConfig({});
  let checked = 0;
  for (const { name, cell } of rows) {
    const plain = /^`([^`]+)`$/.exec(cell);
    // NODE_ID's `hostname-pid` names a pattern, checked below.
    if (!plain || name === 'NODE_ID') continue;
    checked++;
    assert.equal(loadConfig({ [name]: plain[1]! }), defaults, `${name}: the table says ${cell}`);
  }
  assert.ok(checked >= 25, `only ${checked} plain defaults found`);
});

test('the defaults the table writes in words: unset, one worker per core, hostname-pid', () => {
  const defaults = loadConfig({});
  assert.equal(
    rows.filter((r) => r.cell === 'unset').map((r) => r.name).sort(),
    ['DATABASE_URL', 'MEDIA_ANNOUNCED_ADDRESS', 'OPS_TOKEN', 'REDIS_URL'],
  );
  assert.is(defaults.opsToken, undefined);
  assert.is(defaults.databaseUrl, undefined);
  assert.is(defaults.mediaAnnouncedAddress, undefined);
  assert.is(defaults.mediaWorkers, undefined, 'MEDIA_WORKERS unset: the pool starts one per core');
  assert.is(defaults.nodeId, `${hostname()}-${process.pid}`);
});

test.run();
