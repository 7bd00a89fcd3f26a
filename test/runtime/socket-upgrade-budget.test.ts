import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClient } from '../../client/runtime-client.js';
import { RUNTIME_SOCKET_UPGRADE_RETRY_AFTER_S, RUNTIME_SOCKET_UPGRADES_PER_MINUTE } from '../../runtime/runtime-sockets.js';
import { productParts } from '../../server/main.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { controlToken, controlUrl, upgrade, type Answer } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Each upgrade of the runtime socket or the control channel costs a sign-in query and a session read, and replaces the
 * session's previous socket: without a bound, a client holding a valid token could upgrade in a loop. Per session and
 * socket, RUNTIME_SOCKET_UPGRADES_PER_MINUTE upgrades (a burst of as many); past it 429 `rate_limited` with Retry-After,
 * refused before the sign-in is read: after a logout, the refusal is still 429, not 401 `runtime_authorization_expired`.
 */
let server: TestServer;
let env: TestEnvironment;
let ida: RuntimePerson;
let jon: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  ida = await runtimePerson(server, 'ida');
  jon = await runtimePerson(server, 'jon');
  env = await testEnvironment(server.opsUrl, 'upgrade-world', 'ida');
});

async function upgrades(count: number, attempt: () => Promise<Answer>): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await attempt()).status);
  return statuses;
}

const runtimeUpgrade = (page: RuntimeClient): Promise<Answer> => upgrade(page.socketUrl(), RuntimeClient.subprotocols(page.accessToken), page.origin);

function assertRefused(answer: Answer): void {
  assert.is(answer.status, 429);
  assert.is(answer.code, 'rate_limited');
  assert.ok(answer.contentType?.startsWith('application/problem+json'), answer.contentType);
  assert.is(answer.retryAfter, String(RUNTIME_SOCKET_UPGRADE_RETRY_AFTER_S));
}

test('runtime socket: past the budget of a session, 429 rate_limited with Retry-After; another session upgrades', async () => {
  const page = await (await ida.runtime(env)).open();
  const limit = RUNTIME_SOCKET_UPGRADES_PER_MINUTE;
  assert.equal(await upgrades(limit, () => runtimeUpgrade(page)), Array<number>(limit).fill(101));
  assertRefused(await runtimeUpgrade(page));

  const other = await (await jon.runtime(env)).open();
  assert.is((await runtimeUpgrade(other)).status, 101, 'a session of its own, a budget of its own');
});

test('control channel: past the budget of a session, 429 rate_limited with Retry-After', async () => {
  const page = await (await jon.runtime(env)).open();
  const token = await controlToken(page);
  const attempt = (): Promise<Answer> => upgrade(controlUrl(server.url), RuntimeClient.subprotocols(token), page.origin);
  const limit = RUNTIME_SOCKET_UPGRADES_PER_MINUTE;
  assert.equal(await upgrades(limit, attempt), Array<number>(limit).fill(101));
  assertRefused(await attempt());
});

test('the refusal comes before the sign-in is read: after a logout it is still 429, not 401', async () => {
  const kim = await runtimePerson(server, 'kim');
  const page = await (await kim.runtime(env)).open();
  // Another sign-in of kim's, not opened (that would take the lease from the page): its own key, a budget left.
  const spare = await kim.runtime(env);
  const token = await controlToken(page);
  const control = (): Promise<Answer> => upgrade(controlUrl(server.url), RuntimeClient.subprotocols(token), page.origin);
  const limit = RUNTIME_SOCKET_UPGRADES_PER_MINUTE;
  assert.equal(await upgrades(limit, () => runtimeUpgrade(page)), Array<number>(limit).fill(101));
  assert.equal(await upgrades(limit, control), Array<number>(limit).fill(101));

  assert.is((await logoutBrowser(server.url, kim)).status, 200);
  assertRefused(await runtimeUpgrade(page));
  assertRefused(await control());

  const ended = await upgrade(page.socketUrl(), RuntimeClient.subprotocols(spare.accessToken), page.origin);
  assert.equal([ended.status, ended.code], [401, 'runtime_authorization_expired'], 'a session with budget left: its ended sign-in is read, and refused');
});

test.run();
