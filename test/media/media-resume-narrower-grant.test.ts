import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A seat is taken only under `media:request-speak` (floor.take, speaker.accept, a seat on join), and `grant.refresh`
 * refuses a narrower grant so that nothing made under a scope outlives the grant that carried it ("to narrow, connect
 * again with the narrower grant"). Connecting again with a grant without `media:request-speak` resumes the member:
 * it must not keep the seat it could not take under that grant, publishing a microphone and keeping a speaker out.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const policy = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 1, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 };
/** May publish, may not ask to speak. */
const NO_REQUEST_SPEAK = ['media:connect', 'media:join-space', 'media:publish'];
const MIC = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 31_337 }] };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-review-resume-scopes', { directCalls: { enabled: false }, spaces: [{ id: 'one-seat', policy }] }));
});

test('a member seated under media:request-speak who connects again without it is resumed unseated: no microphone, and the seat is free for others', async () => {
  const first = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'one-seat'), world.origin);
  const seated = await first.request('room.join', { rtpCapabilities: {} });
  assert.is((seated.result?.self as { seated: boolean }).seated, true, 'the only seat, on an open floor');
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'one-seat'), world.origin);
  assert.is((await mod.request('room.join', { rtpCapabilities: {} })).ok, true);

  // The same person connects again with a grant that may not request to speak: the first connection is replaced.
  const narrower = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'one-seat', NO_REQUEST_SPEAK), world.origin);
  assert.is(await first.closed, 4409);
  const resumed = await narrower.request('room.join', { rtpCapabilities: {} });
  assert.is(resumed.result?.resumed, true, JSON.stringify(resumed.error));
  const send = await narrower.request('transport.create', { direction: 'send' });
  const produce = await narrower.request('produce', { transportId: send.result?.transportId, kind: 'audio', source: 'microphone', rtpParameters: MIC });
  const modTake = await mod.request('floor.take');
  narrower.close();
  mod.close();
  assert.equal(
    { seatedOnResume: (resumed.result?.self as { seated: boolean }).seated, microphone: produce.ok ? 'published' : produce.error?.code, moderatorTakesTheSeat: modTake.ok ? 'ok' : modTake.error?.code },
    { seatedOnResume: false, microphone: 'not_speaker', moderatorTakesTheSeat: 'ok' },
  );
});

test.run();
