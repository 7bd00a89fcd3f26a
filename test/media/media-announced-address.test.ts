import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * MEDIA_LISTEN_IP and MEDIA_ANNOUNCED_ADDRESS (README, Configuration): transports listen on the first and clients are
 * told the second, the public address in front of it, in every ICE candidate.
 */
const ANNOUNCED = '203.0.113.7';
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;

withTestServer(test, (started) => ({ server } = started), productParts, { ...MEDIA_TEST_ENV, MEDIA_LISTEN_IP: '127.0.0.1', MEDIA_ANNOUNCED_ADDRESS: ANNOUNCED });
test.before(async () => {
  ({ world, modPage } = await mediaWorld(server, 'media-announced', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 } }],
  }));
});

test('every ICE candidate of a transport names MEDIA_ANNOUNCED_ADDRESS, over UDP', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'room'), world.origin);
  assert.is((await conn.request('room.join', { rtpCapabilities: {} })).ok, true);
  for (const direction of ['send', 'recv'] as const) {
    const created = await conn.request('transport.create', { direction });
    const candidates = created.result?.iceCandidates as Array<{ address: string; protocol: string }>;
    assert.ok(candidates.length > 0, direction);
    assert.equal(candidates.map((c) => [c.address, c.protocol]), candidates.map(() => [ANNOUNCED, 'udp']), direction);
  }
  conn.close();
});

test.run();
