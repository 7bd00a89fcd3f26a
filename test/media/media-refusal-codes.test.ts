import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A request naming a producer or consumer the member does not have is refused with the code of what it named
 * (`producer_not_found`, `consumer_not_found`), whether or not the member has made a transport yet: a member with no
 * media at all used to be told `transport_not_found`, for requests that name no transport.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const MICROPHONE = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 5151 }] };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-refusal-codes', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 5, maxSpeakerSeats: 2, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 } }],
  }));
});

test("producer.close and consumer.resume of what the member does not hold: producer_not_found and consumer_not_found, before and after its first transport, and for someone else's", async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'room'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE });
  assert.is(produced.ok, true, JSON.stringify(produced.error));
  const theirs = produced.result?.producerId as string;

  const member = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'room'), world.origin);
  assert.is((await member.request('room.join', { rtpCapabilities: {} })).ok, true);
  const codes: Record<string, string | undefined> = {};
  codes.closeBeforeTransport = (await member.request('producer.close', { producerId: theirs })).error?.code;
  codes.resumeBeforeTransport = (await member.request('consumer.resume', { consumerId: 'made-up' })).error?.code;
  assert.is((await member.request('transport.create', { direction: 'recv' })).ok, true);
  codes.closeAfterTransport = (await member.request('producer.close', { producerId: theirs })).error?.code;
  codes.resumeAfterTransport = (await member.request('consumer.resume', { consumerId: 'made-up' })).error?.code;
  speaker.close();
  member.close();
  assert.equal(codes, { closeBeforeTransport: 'producer_not_found', resumeBeforeTransport: 'consumer_not_found', closeAfterTransport: 'producer_not_found', resumeAfterTransport: 'consumer_not_found' });
});

test.run();
