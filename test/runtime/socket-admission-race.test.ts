import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { productParts } from '../../server/main.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import { runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { runtimeSocket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A runtime socket admitted with the current lease while another page of the same person activates. The
 * supersession lands after the fence check but before the socket subscribed to its session's activity.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let kai: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_EVICTIONS_PER_MINUTE: '1000' }, clock);
test.before(async () => {
  kai = await runtimePerson(server, 'kai');
  env = await testEnvironment(server.opsUrl, 'kais-world', 'kai');
});

test('a socket whose session is superseded during its upgrade is closed 4409, not left open beside the new holder', async () => {
  const a = await (await kai.runtime(env)).open();
  const b = await kai.runtime(env);
  await b.createSession();
  const { sessions } = await runtimeServices(server.services);
  const original = sessions.requireLease.bind(sessions);
  let bActivated: Response | undefined;
  sessions.requireLease = async (caller, sessionId, lease) => {
    const state = await original(caller, sessionId, lease);
    if (sessionId === a.sessionId && bActivated === undefined) bActivated = await b.activate(); // lands inside the upgrade
    return state;
  };
  let socket;
  try {
    socket = await runtimeSocket(a);
  } finally {
    sessions.requireLease = original;
  }
  assert.is(bActivated?.status, 200);
  assert.is(await sessionState(a), 'superseded');
  assert.is(await sessionState(b), 'active');
  // Presence as the new holder sees it: the superseded page is still listed beside it.
  const bSocket = await runtimeSocket(b);
  await bSocket.next('ready');
  bSocket.send({ type: 'presence.list', ref: 'p1' });
  const snapshot = (await bSocket.next('presence.snapshot')) as { members: unknown[] };
  bSocket.ws.close();
  const closed = await Promise.race([socket.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 2000))]);
  assert.is.not(closed, 'open', `superseded page's runtime socket still open 2 s later; it heard ${JSON.stringify(socket.messages)}; presence seen by the holder: ${JSON.stringify(snapshot.members)}`);
  assert.is((closed as { code: number }).code, 4409);
  assert.is(snapshot.members.length, 1, `presence lists both pages of one person: ${JSON.stringify(snapshot.members)}`);
});

test.run();
