import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE } from '../../runtime/runtime-sockets.js';
import { productParts } from '../../server/main.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { upgrade, type Answer } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The runtime socket's per-session upgrade budget is keyed by the `session` of the query, which the client names: a
 * fresh id on every upgrade got a fresh budget, and each attempt cost a sign-in query and a session read. Upgrades are
 * also counted per person (the token's Environment and pairwise subject, checked offline, which a client cannot mint
 * without enrolling an account): past RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE, whatever session is named, 429
 * `rate_limited` before anything is read online.
 */
let server: TestServer;
// Still while the budget is spent: at 60 a minute, a slow run's real clock would refill it between the attempts.
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let lea: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV, clock);
test.before(async () => {
  lea = await runtimePerson(server, 'lea');
  lea.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'person-upgrade-world', 'lea');
});

/** The page's runtime socket address with another session named in the query. */
function naming(page: RuntimeClient, sessionId: string): string {
  const url = new URL(page.socketUrl());
  url.searchParams.set('session', sessionId);
  return url.href;
}

test('a fresh session id on every upgrade does not buy a fresh budget: past the person budget, 429 before the sign-in is read', async () => {
  const page = await (await lea.runtime(env)).open();
  const attempt = (i: number): Promise<Answer> => upgrade(naming(page, `${page.sessionId!}${i}`), RuntimeClient.subprotocols(page.accessToken), page.origin);

  const limit = RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE;
  const answered: Answer[] = [];
  for (let i = 0; i < limit; i++) answered.push(await attempt(i));
  assert.ok(answered.every((a) => a.status !== 429), `every session named within the budget is looked up: ${JSON.stringify(answered.find((a) => a.status === 429))}`);

  // Ended sign-in: an upgrade that reached the stores would be 401 runtime_authorization_expired.
  assert.is((await logoutBrowser(server.url, lea)).status, 200);
  const refused = await attempt(limit);
  assert.equal([refused.status, refused.code], [429, 'rate_limited'], 'refused before the sign-in is read');
  assert.ok(refused.contentType?.startsWith('application/problem+json'), refused.contentType);
  assert.is(refused.retryAfter, String(Math.ceil(60 / limit)));

  const max = await runtimePerson(server, 'max');
  max.device.now = () => clock.now();
  const other = await (await max.runtime(env)).open();
  assert.is((await upgrade(other.socketUrl(), RuntimeClient.subprotocols(other.accessToken), other.origin)).status, 101, 'another person, a budget of their own');
});

test.run();
