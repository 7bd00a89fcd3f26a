import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { controlToken, controlUrl, upgrade, type Answer } from '../support/runtime-socket.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The Runtime's WebSockets (the runtime socket, and the control channel the spec names under Events) refuse an upgrade
 * with the Runtime plane's codes, whose statuses the spec leaves "not shown": the AsyncAPI description must state them
 * per channel, and they must be what the server answers.
 */
let server: TestServer;
let env: TestEnvironment;
let sam: RuntimePerson;
const documented: Record<'runtime' | 'control', Map<string, number>> = { runtime: new Map(), control: new Map() };

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  sam = await runtimePerson(server, 'sam');
  env = await testEnvironment(server.opsUrl, 'sams-world', 'sam');
  const doc = (await (await fetch(`${server.url}/v1/runtime/asyncapi.json`)).json()) as { channels: Record<'runtime' | 'control', { description: string }> };
  for (const channel of ['runtime', 'control'] as const) {
    for (const m of doc.channels[channel].description.matchAll(/`(\d{3}) ([a-z_]+)`/g)) documented[channel].set(m[2]!, Number(m[1]));
  }
});

function assertAsDocumented(channel: 'runtime' | 'control', answer: Answer, code: string): void {
  const status = documented[channel].get(code);
  assert.ok(status, `the ${channel} channel's description names ${code} with its status (${[...documented[channel].keys()].join(', ')})`);
  assert.equal([answer.status, answer.code, answer.contentType], [status, code, 'application/problem+json'], `${channel}: ${code}`);
}

const socketUrl = (query: Record<string, string>): string => {
  const url = new URL('/v1/runtime/socket', server.url.replace(/^http/, 'ws'));
  url.search = new URLSearchParams(query).toString();
  return url.href;
};

test('runtime socket: token, origin, session and lease refusals as documented', async () => {
  const page = await (await sam.runtime(env)).open();
  const sessionId = page.sessionId!;
  const lease = page.lease!;
  const bearer = RuntimeClient.subprotocols(page.accessToken);
  const claims = { session: sessionId, lease: lease.leaseId, leaseVersion: String(lease.leaseVersion) };
  assertAsDocumented('runtime', await upgrade(page.socketUrl(), ['registry.v1.json'], env.origin), 'runtime_token_invalid');
  assertAsDocumented('runtime', await upgrade(page.socketUrl(), bearer, 'https://elsewhere.example'), 'runtime_origin_mismatch');
  assertAsDocumented('runtime', await upgrade(socketUrl({ lease: lease.leaseId, leaseVersion: '1' }), bearer, env.origin), 'runtime_session_required');
  assertAsDocumented('runtime', await upgrade(socketUrl({ ...claims, leaseVersion: 'one' }), bearer, env.origin), 'runtime_lease_required');
  assertAsDocumented('runtime', await upgrade(socketUrl({ ...claims, leaseVersion: String(lease.leaseVersion + 1) }), bearer, env.origin), 'runtime_lease_stale');
  assertAsDocumented('runtime', await upgrade(socketUrl({ ...claims, session: 'rts_00000000000000000000000000' }), bearer, env.origin), 'runtime_session_not_found');

  const standby = await sam.runtime(env);
  assert.is((await standby.createSession()).status, 201);
  assertAsDocumented('runtime', await upgrade(socketUrl({ ...claims, session: standby.sessionId! }), RuntimeClient.subprotocols(standby.accessToken), env.origin), 'runtime_session_standby');
  await (await sam.runtime(env)).open();
  assertAsDocumented('runtime', await upgrade(page.socketUrl(), bearer, env.origin), 'runtime_session_superseded');
});

test('control channel: token, origin and session refusals as documented', async () => {
  const page = await sam.runtime(env);
  assert.is((await page.createSession()).status, 201);
  const token = await controlToken(page);
  assertAsDocumented('control', await upgrade(controlUrl(server.url), ['registry.v1.json'], env.origin), 'runtime_token_invalid');
  assertAsDocumented('control', await upgrade(controlUrl(server.url), RuntimeClient.subprotocols(page.accessToken), env.origin), 'runtime_token_invalid');
  assertAsDocumented('control', await upgrade(controlUrl(server.url), RuntimeClient.subprotocols(token), 'https://elsewhere.example'), 'runtime_origin_mismatch');
  assert.is((await page.release()).status, 200);
  assertAsDocumented('control', await upgrade(controlUrl(server.url), RuntimeClient.subprotocols(token), env.origin), 'runtime_session_ended');
});

test.run();
