import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { RUNTIME_SOCKET_UPGRADES_PER_MINUTE, RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE } from '../../runtime/runtime-sockets.js';
import { productParts } from '../../server/main.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { controlToken, controlUrl, upgrade, type Answer } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The control channel's upgrade budget is keyed by the control token's session, and a person can make sessions (and
 * control tokens for them) at will: each fresh session bought a fresh budget, each attempt costing a sign-in query and
 * a session read. Its upgrades are also counted per person (the token's Environment and pairwise subject, checked
 * offline), as the runtime socket's are: past RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE, whatever session the
 * token names, 429 `rate_limited` before anything is read online.
 */
let server: TestServer;
// Still while the budget is spent: at 60 a minute, a slow run's real clock would refill it between the attempts.
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let eva: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV, clock);
test.before(async () => {
  eva = await runtimePerson(server, 'eva');
  eva.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'control-person-upgrade-world', 'eva');
});

test('fresh sessions do not buy fresh control channel budgets: past the person budget, 429 before the sign-in is read', async () => {
  const page = await eva.runtime(env);
  const limit = RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE;
  // Enough sessions that their per-session budgets together exceed the person's.
  const sessions = Math.ceil(limit / RUNTIME_SOCKET_UPGRADES_PER_MINUTE) + 1;
  const tokens: string[] = [];
  for (let i = 0; i < sessions; i++) {
    assert.is((await page.createSession()).status, 201);
    tokens.push(await controlToken(page));
  }
  const attempt = (i: number): Promise<Answer> =>
    upgrade(controlUrl(server.url), RuntimeClient.subprotocols(tokens[Math.floor(i / RUNTIME_SOCKET_UPGRADES_PER_MINUTE)]!), page.origin);

  const answered: Answer[] = [];
  for (let i = 0; i < limit; i++) answered.push(await attempt(i));
  assert.ok(answered.every((a) => a.status === 101), `every upgrade within the budget is admitted: ${JSON.stringify(answered.find((a) => a.status !== 101))}`);

  // Ended sign-in: an upgrade that reached the stores would be 401 runtime_authorization_expired.
  assert.is((await logoutBrowser(server.url, eva)).status, 200);
  const refused = await attempt(limit);
  assert.equal([refused.status, refused.code], [429, 'rate_limited'], 'refused before the sign-in is read');
  assert.ok(refused.contentType?.startsWith('application/problem+json'), refused.contentType);
  assert.is(refused.retryAfter, String(Math.ceil(60 / limit)));

  const ola = await runtimePerson(server, 'ola');
  ola.device.now = () => clock.now();
  const other = await (await ola.runtime(env)).open();
  assert.is((await upgrade(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(other)), other.origin)).status, 101, 'another person, a budget of their own');
});

test.run();
