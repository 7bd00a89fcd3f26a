import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { MediaCloseCode } from '../../media/control/media-control.messages.js';
import { productParts } from '../../server/main.js';
import { enrolAnother } from '../support/identity.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { logoutBrowser, replayableSignIn, runtimePerson, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A Media connection lives no longer than its grant, and the grant no longer than its Runtime fence and sign-in
 * (docs/media.md, "Control plane"): each end below closes the connection with `session.ended` `grant_ended`, 4401, at
 * once. Revocation, a device signing out, supersession and expiry have their tests in media-grant-end,
 * media-control and media-grant-expiry.
 */
const LEASE_TTL_S = 60;
let server: TestServer;
let world: TestEnvironment;
const clock = new ManualClock(Date.now());
/** Enrolled before the clock moves: enrolment signs with the real time. */
const people = new Map<string, RuntimePerson>();

withTestServer(test, (started) => ({ server } = started), productParts, { ...MEDIA_TEST_ENV, RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_S) }, clock);
test.before(async () => {
  ({ world } = await mediaWorld(server, 'media-sign-in-ends', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } }],
  }));
  for (const handle of ['rel-ms', 'out-ms', 'rem-ms', 'all-ms', 'reuse-ms', 'lap-ms']) {
    const someone = await runtimePerson(server, handle);
    someone.device.now = () => clock.now();
    people.set(handle, someone);
  }
});

async function connected(handle: string, token?: string): Promise<{ someone: RuntimePerson; page: RuntimeClient; conn: MediaControlClient }> {
  const someone = people.get(handle)!;
  const page = await (token === undefined ? await someone.runtime(world) : new RuntimeClient(server.url, token, world.origin)).open();
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(page, 'room'), world.origin);
  assert.is((await conn.request('ping')).ok, true);
  return { someone, page, conn };
}

async function assertGrantEnded(conn: MediaControlClient, when: string): Promise<void> {
  const code = await Promise.race([conn.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 3000))]);
  assert.is.not(code, 'open', `Media connection still open 3 s ${when}`);
  assert.is(code, MediaCloseCode.grantEnded);
  assert.is(MediaCloseCode.grantEnded, 4401);
  assert.equal(conn.pushes.find((p) => p.type === 'session.ended'), { type: 'session.ended', reason: 'grant_ended' });
}

test('the Runtime session behind the grant is released', async () => {
  const { page, conn } = await connected('rel-ms');
  assert.is((await page.release()).status, 200);
  await assertGrantEnded(conn, 'after its Runtime session was released');
});

test('browser SSO logout of the browser that signed the Runtime in', async () => {
  const { someone, conn } = await connected('out-ms');
  const out = await logoutBrowser(server.url, someone);
  assert.is(out.status, 200, await out.clone().text());
  await assertGrantEnded(conn, 'after the browser logout');
});

test('the device behind the sign-in is removed by another device of the account', async () => {
  const { someone, conn } = await connected('rem-ms');
  const phone = await enrolAnother(server.url, 'rem-ms', someone.device, 'rem phone');
  const removed = await phone.request(server.url, 'DELETE', `/v1/account/devices/${someone.device.deviceId}`);
  assert.is(removed.status, 200, await removed.clone().text());
  await assertGrantEnded(conn, 'after the device behind its sign-in was removed');
});

test('another device revokes all the others', async () => {
  const { someone, conn } = await connected('all-ms');
  const phone = await enrolAnother(server.url, 'all-ms', someone.device, 'all phone');
  const revoked = await phone.request(server.url, 'POST', '/v1/account/devices/revoke-all');
  assert.is(revoked.status, 200, await revoked.clone().text());
  await assertGrantEnded(conn, 'after revoke-all');
});

test('the sign-in revoked by a reuse of its authorization code: closed at once, not by the 15 s sweep', async () => {
  const signIn = await replayableSignIn(server.url, people.get('reuse-ms')!, world);
  const { conn } = await connected('reuse-ms', signIn.accessToken);
  assert.is((await signIn.replay()).body.code, 'authorization_code_reused');
  // The clock stands still: the sweep never runs, the revocation itself is told.
  await assertGrantEnded(conn, "after its sign-in's revocation");
});

test('the lease behind the grant lapses (no runtime socket renews it): the grant ends before it expires', async () => {
  const { conn } = await connected('lap-ms');
  clock.advance(LEASE_TTL_S * 1000 + 1_000);
  await assertGrantEnded(conn, 'after its lease lapsed');
});

test.run();
