import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';
import { connect, controlToken, controlUrl, runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { enrolAnother } from '../support/identity.js';

/** The runtime WebSocket (lease-fenced, presence) and the control channel (read-only), through real sockets. */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let ida: RuntimePerson;
let jon: RuntimePerson;
const LEASE_TTL_S = 30;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_S) }, clock);
test.before(async () => {
  ida = await runtimePerson(server, 'ida');
  jon = await runtimePerson(server, 'jon');
  ida.device.now = jon.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'idas-world', 'ida');
});

async function refused(promise: Promise<Socket>, status: number, code: string): Promise<void> {
  try {
    const socket = await promise;
    socket.ws.close();
    assert.unreachable(`expected the upgrade to be refused with ${status} ${code}`);
  } catch (error) {
    const e = error as { status?: number; headers?: Record<string, string | undefined>; body?: { code?: string } };
    assert.is(e.status, status, String(error));
    assert.is(e.body?.code, code);
    // A refused credential names its scheme (RFC 6750 3), on the runtime socket and the control channel alike.
    if (status === 401) assert.match(e.headers?.['www-authenticate'] ?? '', /^Bearer realm="registry"/);
  }
}


test('the runtime socket refuses what the fence refuses, at the upgrade', async () => {
  const page = await (await ida.runtime(env)).open();
  await refused(connect(page.socketUrl(), ['registry.v1.json'], env.origin), 401, 'runtime_token_invalid');
  await refused(runtimeSocket(page, page.accessToken, 'https://evil.example'), 403, 'runtime_origin_mismatch');
  await refused(runtimeSocket(page, await controlToken(page)), 401, 'runtime_token_invalid');
  await refused(connect(page.socketUrl().replace(/leaseVersion=\d+/, 'leaseVersion=99'), RuntimeClient.subprotocols(page.accessToken), env.origin), 409, 'runtime_lease_stale');
  await refused(connect(page.socketUrl().replace(/&lease=[^&]+/, ''), RuntimeClient.subprotocols(page.accessToken), env.origin), 400, 'runtime_lease_required');
  // No session named: the code HTTP gives a missing X-Platform-Runtime-Session, not the lease's.
  await refused(connect(page.socketUrl().replace(/session=[^&]+&/, ''), RuntimeClient.subprotocols(page.accessToken), env.origin), 400, 'runtime_session_required');
  const standby = await ida.runtime(env);
  await standby.createSession();
  standby.lease = page.lease;
  await refused(runtimeSocket(standby), 409, 'runtime_session_standby');
  const withoutClaims = standby.socketUrl().replace(/&lease=[^&]+/, '').replace(/&leaseVersion=\d+/, '');
  await refused(connect(withoutClaims, RuntimeClient.subprotocols(standby.accessToken), env.origin), 409, 'runtime_session_standby');
  const thief = await jon.runtime(env);
  thief.sessionId = page.sessionId;
  thief.lease = page.lease;
  await refused(runtimeSocket(thief), 404, 'runtime_session_not_found');
  // Not a handshake at all: the gateway behind the sockets does not call the path unknown.
  const plain = await fetch(page.socketUrl().replace(/^ws/, 'http'));
  assert.is(plain.status, 426);
  assert.is(((await plain.json()) as { code?: string }).code, 'websocket_upgrade_required');
  // Another method on the socket's path, through the whole server: 405, the path is no unknown route.
  const posted = await fetch(page.socketUrl().replace(/^ws/, 'http'), { method: 'POST', body: '{}' });
  assert.equal([posted.status, posted.headers.get('allow')], [405, 'GET, HEAD']);
  await page.release();
});

test('an active page: ready, presence through the session actor (ephemeral), presence list and hints, ping', async () => {
  const page = await (await ida.runtime(env)).open();
  const socket = await runtimeSocket(page);
  const ready = await socket.next('ready');
  assert.equal(ready, { type: 'ready', sessionId: page.sessionId, leaseVersion: page.lease!.leaseVersion, actorId: ready.actorId });
  const { host } = server.services;
  const before = await host.readCommitted('runtime-session', page.sessionId!);
  socket.send({ type: 'presence.update', state: 'away', ref: 'p1' });
  assert.equal(await socket.next('presence.updated'), { type: 'presence.updated', state: 'away', ref: 'p1' });
  type Presence = { context: { presence: { state: string } | null } };
  assert.is((host.peekCommitted('runtime-session', page.sessionId!) as unknown as Presence).context.presence?.state, 'away', 'the session actor holds it');
  const after = await host.readCommitted('runtime-session', page.sessionId!);
  assert.is(after!.version, before!.version, 'presence is ephemeral: nothing journaled');
  assert.is((after!.state as Presence).context.presence, null, 'nor stored');

  const jonPage = await (await jon.runtime(env)).open();
  const jonSocket = await runtimeSocket(jonPage);
  await jonSocket.next('ready');
  clock.advance(200);
  await socket.next('hint');
  socket.send({ type: 'presence.list', ref: 'l1' });
  const snapshot = await socket.next('presence.snapshot');
  const states = (snapshot.members as Array<{ state: string }>).map((m) => m.state).sort();
  assert.equal(states, ['available', 'away']);
  socket.send({ type: 'ping', ref: 'x' });
  assert.equal(await socket.next('pong'), { type: 'pong', ref: 'x' });
  socket.send({ type: 'presence.update', state: 'asleep' });
  const refused = await socket.next('error');
  assert.is(refused.code, 'validation_failed');
  assert.match(String(refused.requestId), /\S/, 'an in-band error carries its request id');
  socket.ws.close();
  jonSocket.ws.close();
  await jonPage.release();
  await page.release();
});

test('a superseded page is told and its socket closed with 4409; the open socket keeps the lease alive', async () => {
  const page = await (await ida.runtime(env)).open();
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  // Three lease lifetimes pass; the open socket renews, so the page stays active.
  for (let i = 0; i < 9; i++) {
    clock.advance(10_000);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.is(await sessionState(page), 'active');
  await (await ida.runtime(env)).open();
  assert.equal(await socket.next('lease.ended'), { type: 'lease.ended', reason: 'superseded' });
  assert.is((await socket.closed).code, 4409);
  clock.advance(60_000);
});

test('a released page closes 4410; a page of the same person in another Environment takes the lease: 4409', async () => {
  const page = await (await ida.runtime(env)).open();
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  assert.is((await page.release()).status, 200);
  assert.equal(await socket.next('lease.ended'), { type: 'lease.ended', reason: 'released' });
  assert.is((await socket.closed).code, 4410);

  // One lease per person, whatever the Environment: the page elsewhere evicts this one.
  const here = await (await ida.runtime(env)).open();
  const hereSocket = await runtimeSocket(here);
  await hereSocket.next('ready');
  const elsewhere = await testEnvironment(server.opsUrl, 'idas-other-world', 'ida');
  const there = await (await ida.runtime(elsewhere)).open();
  assert.equal(await hereSocket.next('lease.ended'), { type: 'lease.ended', reason: 'superseded' });
  assert.is((await hereSocket.closed).code, 4409);
  assert.is(await sessionState(here), 'superseded');
  assert.is(await sessionState(there), 'active');
  await there.release();
});

test('the control channel: control token only, read-only, streams activity; open to standby and superseded sessions', async () => {
  const page = await ida.runtime(env);
  await page.createSession();
  const token = await controlToken(page);
  await refused(connect(controlUrl(server.url), RuntimeClient.subprotocols(page.accessToken), env.origin), 401, 'runtime_token_invalid');
  await refused(connect(controlUrl(server.url), RuntimeClient.subprotocols(token), 'https://evil.example'), 403, 'runtime_origin_mismatch');
  await refused(connect(controlUrl(server.url), RuntimeClient.subprotocols(token), ''), 400, 'runtime_origin_required');
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(token), env.origin);
  const first = await control.next('session.activity');
  assert.is(first.status, 'standby');
  assert.is(first.reason, 'connected');
  await page.activate();
  await waitFor(() => control.messages.find((m) => m.reason === 'activated'), 'the activation');
  await (await ida.runtime(env)).open();
  await waitFor(() => control.messages.find((m) => m.status === 'superseded'), 'the supersession');
  assert.is(control.ws.readyState, WebSocket.OPEN, 'a superseded session keeps its control channel');

  // Any client message closes a read-only channel; presence is not served there.
  control.send({ type: 'presence.update', state: 'away' });
  assert.is((await control.closed).code, 1008);

  // A control token past its five minutes: the authorization ended (ask for a new one), not a forged token.
  const stale = await controlToken(page);
  clock.advance(5 * 60_000 + 1_000);
  await refused(connect(controlUrl(server.url), RuntimeClient.subprotocols(stale), env.origin), 401, 'runtime_authorization_expired');
  clock.advance(60_000);
});

test('the control channel takes no message: one over its 1 KiB limit closes it 1009 (too large), not 1008', async () => {
  const page = await ida.runtime(env);
  await page.createSession();
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(page)), env.origin);
  assert.is((await control.next('session.activity')).reason, 'connected');
  control.send({ type: 'presence.update', state: 'x'.repeat(1_100) });
  assert.is((await control.closed).code, 1009);
  await page.release();
});

test('the control channel never ends on an older state than the session has, however activations race', async () => {
  const a = await jon.runtime(env);
  await a.createSession();
  const b = await jon.runtime(env);
  await b.createSession();
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(a)), env.origin);
  await control.next('session.activity');
  for (let round = 0; round < 12; round++) {
    const answers = await Promise.all(round % 2 ? [b.activate(), a.activate()] : [a.activate(), b.activate()]);
    for (const res of answers) assert.is(res.status, 200, await res.clone().text());
    const truth = await sessionState(a);
    const last = () => control.messages.filter((m) => m.type === 'session.activity').at(-1);
    await waitFor(() => last()?.status === truth, `round ${round}: the channel to say ${truth} (got ${JSON.stringify(control.messages.slice(-3))})`);
    await new Promise((r) => setTimeout(r, 30));
    assert.is(last()?.status, truth, `round ${round}: nothing older arrived after it`);
    // Two evictions a round at most; the default quota (10 a minute) refills.
    clock.advance(12_000);
  }
  control.ws.close();
});

test('a sign-in that ends without a logout (the device signs out, raising the epoch) closes the socket at the next renewal round', async () => {
  const page = await (await jon.runtime(env)).open();
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  const token = await controlToken(page);
  // A device of two (the only one may not sign out).
  await enrolAnother(server.url, 'jon', jon.device, 'jon phone');
  const out = await jon.device.request(server.url, 'POST', '/v1/account/sign-out');
  assert.is(out.status, 204, await out.clone().text());
  clock.advance(10_000);
  assert.equal(await socket.next('lease.ended'), { type: 'lease.ended', reason: 'revoked' });
  assert.is((await socket.closed).code, 4401);
  // The control channel checks the same sign-in online at its upgrade: the unexpired control token no longer opens it.
  await refused(connect(controlUrl(server.url), RuntimeClient.subprotocols(token), env.origin), 401, 'runtime_authorization_expired');
});

test('browser SSO logout: control channels hear browser.signed_out and close 4401; runtime sockets close 4401', async () => {
  const page = await (await ida.runtime(env)).open();
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(page)), env.origin);
  await control.next('session.activity');
  const out = await logoutBrowser(server.url, ida);
  assert.is(out.status, 200, await out.clone().text());
  assert.is((await control.next('browser.signed_out')).sessionId, page.sessionId);
  assert.is((await control.closed).code, 4401);
  assert.equal(await socket.next('lease.ended'), { type: 'lease.ended', reason: 'revoked' });
  assert.is((await socket.closed).code, 4401);
});

test.run();
