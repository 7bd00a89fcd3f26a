import { readdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '../../server/config.js';

/**
 * README.md's Configuration table is the newcomer's list of settings: it names every variable the server reads, no
 * other, and each default it writes as a plain value is the one the server uses.
 */
const ROOT = new URL('../../../', import.meta.url);
const README = readFileSync(new URL('README.md', ROOT), 'utf8');
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

/** The product's sources (what `npm start` and `registry-admin` run), not tests, benches or scripts. */
const SOURCE_FOLDERS = ['actors', 'bin', 'identity', 'machines', 'media', 'plugins', 'runtime', 'server', 'storage', 'transport'];

test('every other variable the sources read is named in the Configuration section (below the table)', () => {
  const read = new Set<string>();
  for (const folder of SOURCE_FOLDERS) {
    for (const file of readdirSync(new URL(`${folder}/`, ROOT), { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts')) continue;
      const text = readFileSync(new URL(`${folder}/${file}`, ROOT), 'utf8');
      for (const [, name] of text.matchAll(/\b(?:process\.)?env\.([A-Z][A-Z0-9_]*)/g)) read.add(name!);
    }
  }
  read.delete('HOME');
  assert.ok(read.has('UWS_USE_FALLBACK'), 'the scan finds process.env reads');
  const unnamed = [...read].filter((name) => !section.includes(`\`${name}\``)).sort();
  assert.equal(unnamed, [], `read by the sources but not named under ## Configuration: ${unnamed.join(', ')}`);
});

test.run();
