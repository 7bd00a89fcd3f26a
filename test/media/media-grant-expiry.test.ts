import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MediaCloseCode } from '../../media/control/media-control.messages.js';
import { PLUGIN_GRANT_TTL_S } from '../../runtime/plugin-grants.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A Media connection lives no longer than its grant (docs/media.md; AsyncAPI close codes): a grant that expires
 * without `grant.refresh` ends the connection with `session.ended` `grant_expired` and close 4410, and a refresh to a
 * fresh grant carries the connection to that grant's expiry instead.
 */
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;
const clock = new ManualClock(Date.now());
const TTL_MS = PLUGIN_GRANT_TTL_S * 1000;

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV, clock);
test.before(async () => {
  ({ world, modPage: page } = await mediaWorld(server, 'media-grant-expiry', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } }],
  }));
});

const endedBy = (conn: MediaControlClient): unknown => conn.pushes.find((p) => p.type === 'session.ended');

test('a grant that expires without grant.refresh closes the connection 4410 after session.ended grant_expired', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(page, 'room'), world.origin);
  assert.is((await conn.request('room.join', { rtpCapabilities: {} })).ok, true);
  clock.advance(TTL_MS - 1_000);
  assert.is((await conn.request('ping')).ok, true, 'open until its grant expires');
  clock.advance(1_000);
  assert.is(await conn.closed, MediaCloseCode.grantExpired);
  assert.is(MediaCloseCode.grantExpired, 4410);
  assert.equal(endedBy(conn), { type: 'session.ended', reason: 'grant_expired' });
});

test('grant.refresh to a fresh grant moves the end to its expiry', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(page, 'room'), world.origin);
  assert.is((await conn.request('room.join', { rtpCapabilities: {} })).ok, true);
  clock.advance(TTL_MS / 2);
  const fresh = await mediaGrant(page, 'room');
  const refreshed = await conn.request('grant.refresh', { grant: fresh });
  assert.is(refreshed.ok, true, JSON.stringify(refreshed.error));
  assert.is(Date.parse(refreshed.result?.grantExpiresAt as string), clock.now() + TTL_MS);
  clock.advance(TTL_MS / 2 + 1_000);
  assert.is((await conn.request('ping')).ok, true, 'past the first grant\'s expiry, on the fresh one');
  assert.is(conn.closeCode, undefined);
  clock.advance(TTL_MS / 2);
  await waitFor(() => conn.closeCode, 'the close at the fresh grant\'s expiry');
  assert.is(conn.closeCode, 4410);
  assert.equal(endedBy(conn), { type: 'session.ended', reason: 'grant_expired' });
});

test.run();
