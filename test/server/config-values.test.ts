import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../../server/config.js';
import { runToExit } from '../support/process.js';

/**
 * Numeric settings are whole numbers written in decimal. A value that is not one (an empty `PORT=` line of an env file,
 * a blank left by a template) is refused naming the variable, like any other invalid value, instead of being read as
 * 0: a public or operator listener on a random port, journal and ended-actor retention switched off.
 */
function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return 'accepted';
}

for (const name of ['PORT', 'OPS_PORT', 'ACTOR_JOURNAL_RETENTION_DAYS', 'ACTOR_ENDED_RETENTION_DAYS', 'SHUTDOWN_TIMEOUT_MS']) {
  test(`${name} empty or blank is refused, naming it`, () => {
    for (const value of ['', ' ']) assert.match(refusal({ [name]: value }), new RegExp(`invalid configuration: ${name}: `), `${name}=${JSON.stringify(value)}`);
  });
}

test('numbers in other notations are refused rather than read as something else', () => {
  for (const value of ['0x1F90', '8e3', '8080.0', '+8080']) assert.match(refusal({ PORT: value }), /invalid configuration: PORT: /, `PORT=${value}`);
});

test('decimal values, surrounded by blanks or not, and unset variables still work', () => {
  const config = loadConfig({ PORT: '8081', OPS_PORT: ' 9091 ', ACTOR_JOURNAL_RETENTION_DAYS: '0', SHUTDOWN_TIMEOUT_MS: '1000' });
  assert.is(config.port, 8081);
  assert.is(config.opsPort, 9091);
  assert.is(config.actorJournalRetentionDays, 0);
  assert.is(config.shutdownTimeoutMs, 1000);
  const defaults = loadConfig({});
  assert.is(defaults.port, 8080);
  assert.is(defaults.opsPort, 9090);
  assert.is(defaults.actorEndedRetentionDays, 30);
  assert.is(defaults.mediaWorkers, undefined);
});

test('MEDIA_CALLBACK_ALLOW_LOOPBACK: off unless 1; any other value is refused, naming it', () => {
  assert.is(loadConfig({}).mediaCallbackAllowLoopback, false);
  assert.is(loadConfig({ MEDIA_CALLBACK_ALLOW_LOOPBACK: '0' }).mediaCallbackAllowLoopback, false);
  assert.is(loadConfig({ MEDIA_CALLBACK_ALLOW_LOOPBACK: '1' }).mediaCallbackAllowLoopback, true);
  for (const value of ['', 'true', 'yes', '2', ' 1']) {
    assert.match(refusal({ MEDIA_CALLBACK_ALLOW_LOOPBACK: value }), /invalid configuration: MEDIA_CALLBACK_ALLOW_LOOPBACK: /, JSON.stringify(value));
  }
});

test('PUBLIC_BASE_URL, the OIDC issuer, is refused with a query, a fragment, user info or another scheme, naming it', () => {
  for (const value of ['https://registry.example/?tenant=a', 'https://registry.example/#x', 'https://registry.example?', 'https://ops@registry.example', 'ftp://registry.example']) {
    assert.match(refusal({ PUBLIC_BASE_URL: value }), /invalid configuration: PUBLIC_BASE_URL: /, value);
  }
  for (const value of ['https://registry.example', 'https://registry.example/', 'https://registry.example:8443/registry', 'http://127.0.0.1:8080']) {
    assert.is(refusal({ PUBLIC_BASE_URL: value }), 'accepted', value);
  }
});

test('the server process refuses an empty PORT with exit 2 and one line naming it, before starting anything', async () => {
  const { code, output } = await runToExit('dist/server/main.js', { PORT: '', OPS_PORT: '0', HOST: '127.0.0.1', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
  assert.is(code, 2, output.slice(-2000));
  assert.match(output, /^registry: invalid configuration: PORT: .*\n$/);
});

test.run();
