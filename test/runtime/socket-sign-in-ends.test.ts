import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { ENVIRONMENT_GRANT_TTL_MS } from '../../identity/oauth-grants.js';
import { productParts } from '../../server/main.js';
import { enrolAnother } from '../support/identity.js';
import { replayableSignIn, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { connect, controlToken, controlUrl, runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * The runtime socket and the control channel live on their sign-in (docs/decisions.md, Runtime plane, "Runtime
 * socket"): every way the sign-in ends closes both, 4401; a raised account epoch and a revoked grant at once, anything
 * else (its expiry) within a renewal round. The token they were opened with is checked at the upgrade only. Sign-out of a device and browser
 * logout have their tests in runtime-sockets.test.ts; these are the other ends.
 */
const LEASE_TTL_S = 3600;
const ROUND_MS = (LEASE_TTL_S * 1000) / 3;
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
/** Enrolled before the clock moves: enrolment signs with the real time. */
const people = new Map<string, RuntimePerson>();

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_S) }, clock);
test.before(async () => {
  for (const handle of ['owner-sie', 'ava-sie', 'ben-sie', 'cal-sie', 'dee-sie', 'eve-sie']) people.set(handle, await person(handle));
  env = await testEnvironment(server.opsUrl, 'sign-in-ends', 'owner-sie');
});

async function person(handle: string): Promise<RuntimePerson> {
  const someone = await runtimePerson(server, handle);
  someone.device.now = () => clock.now();
  return someone;
}

/** An active page of the person with its runtime socket and control channel open, both past their first message. */
async function openPage(someone: RuntimePerson, page?: RuntimeClient): Promise<{ page: RuntimeClient; socket: Socket; control: Socket }> {
  const opened = await (page ?? (await someone.runtime(env))).open();
  const socket = await runtimeSocket(opened);
  await socket.next('ready');
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(opened)), env.origin);
  await control.next('session.activity');
  return { page: opened, socket, control };
}

const closedWithin = (socket: Socket, ms: number) => Promise.race([socket.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), ms))]);

async function assertRevoked(sockets: { socket: Socket; control: Socket }, when: string): Promise<void> {
  const [runtime, control] = await Promise.all([closedWithin(sockets.socket, 3000), closedWithin(sockets.control, 3000)]);
  assert.is.not(runtime, 'open', `runtime socket still open ${when}; heard ${JSON.stringify(sockets.socket.messages)}`);
  assert.is.not(control, 'open', `control channel still open ${when}; heard ${JSON.stringify(sockets.control.messages)}`);
  assert.equal(sockets.socket.messages.at(-1), { type: 'lease.ended', reason: 'revoked' });
  assert.is((runtime as { code: number }).code, 4401);
  assert.is((control as { code: number }).code, 4401);
}

test('the device that made the sign-in is removed by another device: both sockets close 4401 at once', async () => {
  const ava = people.get('ava-sie')!;
  const open = await openPage(ava);
  const phone = await enrolAnother(server.url, 'ava-sie', ava.device, 'ava phone');
  const removed = await phone.request(server.url, 'DELETE', `/v1/account/devices/${ava.device.deviceId}`);
  assert.is(removed.status, 200, await removed.clone().text());
  await assertRevoked(open, 'after the device behind its sign-in was removed');
});

test('another device revokes all the others: both sockets close 4401 at once', async () => {
  const ben = people.get('ben-sie')!;
  const open = await openPage(ben);
  const phone = await enrolAnother(server.url, 'ben-sie', ben.device, 'ben phone');
  const revoked = await phone.request(server.url, 'POST', '/v1/account/devices/revoke-all');
  assert.is(revoked.status, 200, await revoked.clone().text());
  await assertRevoked(open, 'after revoke-all');
});

test('the sign-in revoked by a reuse of its authorization code: both sockets close 4401 at once', async () => {
  const cal = people.get('cal-sie')!;
  const signIn = await replayableSignIn(server.url, cal, env);
  const open = await openPage(cal, new RuntimeClient(server.url, signIn.accessToken, env.origin));
  assert.is((await signIn.replay()).body.code, 'authorization_code_reused');
  // The clock stands still: no renewal round runs, the revocation itself is told.
  await assertRevoked(open, 'after its sign-in was revoked');
});

test('a lease that lapses unrenewed (the node stalled past its deadline): lease.ended lapsed, 4412, the control channel stays', async () => {
  const eve = people.get('eve-sie')!;
  const open = await openPage(eve);
  clock.advance(LEASE_TTL_S * 1000 + 1_000);
  const closed = await closedWithin(open.socket, 3000);
  assert.is.not(closed, 'open', `runtime socket still open past its lease; heard ${JSON.stringify(open.socket.messages)}`);
  assert.equal(open.socket.messages.at(-1), { type: 'lease.ended', reason: 'lapsed' });
  assert.is((closed as { code: number }).code, 4412);
  // A session that lost the lease is standby, still live: its control channel is told and stays.
  const told = await waitFor(() => open.control.messages.find((m) => m.status === 'standby'), 'the control channel to say standby');
  assert.is(told.reason, 'lease_lapsed');
  assert.is(await closedWithin(open.control, 200), 'open');
  open.control.ws.close();
});

test('past the tokens\' exp the sockets stay open and served; the sign-in\'s own end closes them 4401 within a round', async () => {
  const dee = people.get('dee-sie')!;
  const open = await openPage(dee);
  // Past the access token's ten minutes and the control token's five: checked at the upgrade only.
  clock.advance(11 * 60_000);
  await new Promise((r) => setTimeout(r, 100));
  open.socket.send({ type: 'ping', ref: 'late' });
  assert.equal(await open.socket.next('pong'), { type: 'pong', ref: 'late' });
  assert.is(await closedWithin(open.control, 200), 'open');
  // The Environment sign-in itself lasts twelve hours; the open socket renewed the lease all along.
  clock.advance(ENVIRONMENT_GRANT_TTL_MS - 11 * 60_000 + ROUND_MS);
  await assertRevoked(open, "a renewal round after the sign-in's end");
});

test.run();
