import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';
import { connect, controlToken, controlUrl, runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { enrolAnother } from '../support/identity.js';

/**
 * The lifetimes of the Runtime plane's sockets: one runtime socket per session (a newer one replaces the older, whose
 * close must not take the live one's presence along), one control channel per session likewise, sockets that close the moment their sign-in ends without a
 * logout, and a logout whose Runtime step failed once that the browser can retry.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let ida: RuntimePerson;
let jon: RuntimePerson;
let kim: RuntimePerson;
let lea: RuntimePerson;
const LEASE_TTL_S = 30;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_S) }, clock);
test.before(async () => {
  ida = await runtimePerson(server, 'ida');
  jon = await runtimePerson(server, 'jon');
  kim = await runtimePerson(server, 'kim');
  lea = await runtimePerson(server, 'lea');
  ida.device.now = jon.device.now = kim.device.now = lea.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'idas-world', 'ida');
});



test('a newer runtime socket of a session replaces the older one (4411), and keeps the session present and hinted', async () => {
  const page = await (await ida.runtime(env)).open();
  const old = await runtimeSocket(page);
  await old.next('ready');
  const fresh = await runtimeSocket(page);
  await fresh.next('ready');
  assert.is((await old.closed).code, 4411, 'the older socket is closed as replaced');
  clock.advance(200);
  await new Promise((r) => setTimeout(r, 50));
  const hintsBefore = fresh.messages.filter((m) => m.type === 'hint').length;
  // Another member of the Environment joins: the live page hears the hint and is still listed.
  const jonPage = await (await jon.runtime(env)).open();
  const jonSocket = await runtimeSocket(jonPage);
  await jonSocket.next('ready');
  clock.advance(200);
  await waitFor(() => fresh.messages.filter((m) => m.type === 'hint').length > hintsBefore, 'a presence hint on the live socket');
  jonSocket.send({ type: 'presence.list', ref: 'j' });
  const snapshot = await jonSocket.next('presence.snapshot');
  const actors = (snapshot.members as Array<{ actorId: string }>).map((m) => m.actorId);
  const ready = fresh.messages.find((m) => m.type === 'ready')!;
  assert.ok(actors.includes(String(ready.actorId)), `ida's live page is present; members were ${JSON.stringify(snapshot.members)}`);
  assert.is(fresh.ws.readyState, WebSocket.OPEN);
  jonSocket.ws.close();
  fresh.ws.close();
  await jonPage.release();
  await page.release();
});

test('one session holds one runtime socket: opening five leaves only the newest open', async () => {
  const page = await (await ida.runtime(env)).open();
  const sockets: Socket[] = [];
  for (let i = 0; i < 5; i++) {
    const s = await runtimeSocket(page);
    await s.next('ready');
    sockets.push(s);
  }
  const codes = await Promise.all(sockets.slice(0, -1).map(async (s) => (await s.closed).code));
  assert.equal(codes, [4411, 4411, 4411, 4411]);
  assert.is(sockets.at(-1)!.ws.readyState, WebSocket.OPEN);
  sockets.at(-1)!.ws.close();
  await page.release();
});

test('one control token opens a bounded number of control channels: one per session, the newer replacing the older (4411)', async () => {
  const page = await (await ida.runtime(env)).open();
  const token = await controlToken(page);
  // Within the session's upgrade budget (RUNTIME_SOCKET_UPGRADES_PER_MINUTE), which bounds the replays by rate.
  const attempts = 15;
  const sockets: Socket[] = [];
  let refusedCount = 0;
  for (let i = 0; i < attempts; i++) {
    try {
      sockets.push(await connect(controlUrl(server.url), RuntimeClient.subprotocols(token), env.origin));
    } catch {
      refusedCount++;
    }
  }
  // The replaced channels close asynchronously: wait (not a fixed 300 ms) until at most one is left open.
  const isOpen = (s: Socket): boolean => s.ws.readyState === WebSocket.OPEN;
  await waitFor(() => sockets.filter(isOpen).length <= 1, 'the replaced control channels to close').catch(() => undefined);
  const open = sockets.filter(isOpen);
  assert.is(refusedCount, 0, 'a replayed token is not refused at the upgrade: the newer channel replaces the older');
  assert.is(open.length, 1, `${open.length} control channels of one session open at once from one control token`);
  assert.is(open[0], sockets.at(-1), 'the newest channel is the one left open');
  const codes = await Promise.all(sockets.slice(0, -1).map(async (s) => (await s.closed).code));
  assert.ok(codes.every((code) => code === 4411), `the older channels closed as replaced: ${codes.join(' ')}`);
  // The one left open still hears its session: releasing it reaches the newest channel.
  await open[0]!.next('session.activity');
  await page.release();
  assert.is((await open[0]!.closed).code, 4410);
});

test('a sign-in that ends without a logout (the device signs out) closes the runtime socket and the control channel at once', async () => {
  const person = kim;
  const page = await (await person.runtime(env)).open();
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(page)), env.origin);
  await control.next('session.activity');
  // A device of two (the only one may not sign out).
  await enrolAnother(server.url, 'kim', person.device, 'kim phone');
  const out = await person.device.request(server.url, 'POST', '/v1/account/sign-out');
  assert.is(out.status, 204, await out.clone().text());
  // No renewal round runs (the clock stands still): the raised account epoch is told to the sockets.
  assert.is((await socket.closed).code, 4401);
  assert.is((await socket.next('lease.ended')).reason, 'revoked');
  assert.is((await control.closed).code, 4401);
});

test('a logout whose Runtime step failed once is retried by the browser, and the control channel then hears browser.signed_out', async () => {
  const person = lea;
  const page = await (await person.runtime(env)).open();
  const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(await controlToken(page)), env.origin);
  await control.next('session.activity');
  // The console session, as logoutBrowser() in test/support/runtime.ts opens it.
  const desktop = await person.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const consoleSession = await person.browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  const { csrfToken } = (await consoleSession.json()) as { csrfToken: string };
  const logout = () => person.browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': csrfToken } });
  // One transient failure of the session actor while the logout listener runs.
  const host = server.services.host as unknown as { send: (...args: unknown[]) => Promise<unknown> };
  const original = host.send;
  let failed = false;
  host.send = function (this: unknown, ...args: unknown[]) {
    const command = args[2] as { type?: string };
    if (!failed && command?.type === 'session.revoke') {
      failed = true;
      return Promise.reject(new Error('transient failure'));
    }
    return original.apply(this, args);
  };
  const first = await logout();
  host.send = original;
  assert.ok(failed, 'the fault was injected');
  assert.ok(first.status >= 500, `the first logout failed (${first.status})`);
  // "A listener that fails fails the logout, which the browser retries" (identity/browser-sessions.ts:160)
  const retry = await logout();
  const retryBody = await retry.text();
  const signedOut = (): boolean => control.messages.some((m) => m.type === 'browser.signed_out') && control.ws.readyState !== WebSocket.OPEN;
  await waitFor(signedOut, 'browser.signed_out and the close of the control channel').catch(() => undefined);
  const heard = control.messages.some((m) => m.type === 'browser.signed_out');
  const state = control.ws.readyState;
  control.ws.close();
  assert.ok(heard && state !== WebSocket.OPEN, `after the retry (${retry.status} ${retryBody}) the control channel must have heard browser.signed_out and closed; it is ${state === WebSocket.OPEN ? 'still open' : 'closed'} and heard=${heard}`);
});

test.run();
