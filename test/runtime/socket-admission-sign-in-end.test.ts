import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import { enrolAnother } from '../support/identity.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { connect, controlToken, controlUrl, runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A sign-in that ends without a logout (a device of the account signs out, raising its epoch) while a socket under it
 * is being admitted: the upgrade checked the sign-in before the end, and the socket subscribes to the account's
 * sign-in changes only once it opens, after the end was told. It must close all the same (docs/decisions.md: such sockets
 * close "at once"), not stay open until a renewal round (which never runs here: the clock stands still).
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let ann: RuntimePerson;
let bob: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);
test.before(async () => {
  ann = await runtimePerson(server, 'ann-si');
  bob = await runtimePerson(server, 'bob-si');
  ann.device.now = bob.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'sign-in-end', 'ann-si');
});

/** Signs out one device of the person's two: their account epoch is raised, their sign-ins end. */
async function signOutADevice(person: RuntimePerson, handle: string): Promise<void> {
  await enrolAnother(server.url, handle, person.device, `${handle} phone`);
  const out = await person.device.request(server.url, 'POST', '/v1/account/sign-out');
  assert.is(out.status, 204, await out.clone().text());
}

const closedWithin = (socket: Socket, ms: number) => Promise.race([socket.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), ms))]);

test('the sign-in ends while the runtime socket is admitted: the socket closes 4401 once open', async () => {
  const page = await (await ann.runtime(env)).open();
  const { sessions } = await runtimeServices(server.services);
  const original = sessions.requireLease.bind(sessions);
  let ended = false;
  sessions.requireLease = async (caller, sessionId, lease) => {
    const state = await original(caller, sessionId, lease);
    if (sessionId === page.sessionId && !ended) {
      ended = true;
      await signOutADevice(ann, 'ann-si');
    }
    return state;
  };
  let socket: Socket;
  try {
    socket = await runtimeSocket(page);
  } finally {
    sessions.requireLease = original;
  }
  assert.ok(ended);
  const closed = await closedWithin(socket, 2000);
  assert.is.not(closed, 'open', `runtime socket still open 2 s after its sign-in ended; heard ${JSON.stringify(socket.messages)}`);
  assert.is((closed as { code: number }).code, 4401);
});

test('the sign-in ends while the control channel is admitted: the channel closes 4401 once open', async () => {
  const client = (await runtimeServices(server.services)).sessions;
  const bobPage = await bob.runtime(env);
  assert.is((await bobPage.createSession()).status, 201);
  const control = await controlToken(bobPage);
  const original = client.liveSession.bind(client);
  let ended = false;
  client.liveSession = async (owner, sessionId) => {
    const state = await original(owner, sessionId);
    if (sessionId === bobPage.sessionId && !ended) {
      ended = true;
      await signOutADevice(bob, 'bob-si');
    }
    return state;
  };
  let channel: Socket;
  try {
    channel = await connect(controlUrl(server.url), RuntimeClient.subprotocols(control), env.origin);
  } finally {
    client.liveSession = original;
  }
  assert.ok(ended);
  const closed = await closedWithin(channel, 2000);
  assert.is.not(closed, 'open', `control channel still open 2 s after its sign-in ended; heard ${JSON.stringify(channel.messages)}`);
  assert.is((closed as { code: number }).code, 4401);
});

test.run();
