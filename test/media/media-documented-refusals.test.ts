import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Refusal codes the media-v2-data-plane document lists for a client's mistakes, each answered as such (docs/media.md:
 * "a transport connected twice: `transport_already_connected`"), never `internal_error`.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const policy = (encryption: string) => ({ mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption, reconnectGraceSeconds: 5 });
const MIC = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 4242 }] };
const DTLS = { role: 'client', fingerprints: [{ algorithm: 'sha-256', value: Array.from({ length: 32 }, () => 'CD').join(':') }] };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-refusal-codes', {
    directCalls: { enabled: false },
    spaces: [{ id: 'plain', policy: policy('transport') }, { id: 'blind', policy: policy('sfu_blind') }],
  }));
});

test('transports, producers and consumers: connected twice, the wrong direction, an unknown consumer, capabilities that cannot receive', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'plain'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const recv = (await speaker.request('transport.create', { direction: 'recv' })).result?.transportId as string;
  const codes: Record<string, string | undefined> = {};
  assert.is((await speaker.request('transport.connect', { transportId: send, dtlsParameters: DTLS })).ok, true);
  codes.connectedTwice = (await speaker.request('transport.connect', { transportId: send, dtlsParameters: DTLS })).error?.code;
  codes.produceOnRecv = (await speaker.request('produce', { transportId: recv, kind: 'audio', source: 'microphone', rtpParameters: MIC })).error?.code;
  codes.unknownConsumer = (await speaker.request('consumer.resume', { consumerId: 'no-such-consumer' })).error?.code;
  const produced = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MIC });
  assert.is(produced.ok, true, JSON.stringify(produced.error));
  codes.consumeOnSend = (await speaker.request('consume', { transportId: send, producerId: produced.result?.producerId })).error?.code;

  // A listener whose capabilities (given at join) hold no codec of the producer's.
  const listener = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'plain'), world.origin);
  assert.is((await listener.request('room.join', { rtpCapabilities: { codecs: [], headerExtensions: [] } })).ok, true);
  const listenerRecv = (await listener.request('transport.create', { direction: 'recv' })).result?.transportId as string;
  codes.cannotReceive = (await listener.request('consume', { transportId: listenerRecv, producerId: produced.result?.producerId })).error?.code;
  speaker.close();
  listener.close();
  assert.equal(codes, {
    connectedTwice: 'transport_already_connected',
    produceOnRecv: 'transport_wrong_direction',
    unknownConsumer: 'consumer_not_found',
    consumeOnSend: 'transport_wrong_direction',
    cannotReceive: 'cannot_consume',
  });
});

test('e2ee.key: to a member not connected, target_not_connected; in a transport-encrypted room, e2ee_not_used', async () => {
  const blind = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'blind'), world.origin);
  assert.is((await blind.request('room.join', { rtpCapabilities: {} })).ok, true);
  const toNobody = await blind.request('e2ee.key', { to: 'nobody-here', envelope: 'opaque' });
  blind.close();
  const plain = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'plain'), world.origin);
  assert.is((await plain.request('room.join', { rtpCapabilities: {} })).ok, true);
  const notUsed = await plain.request('e2ee.key', { to: 'nobody-here', envelope: 'opaque' });
  plain.close();
  assert.equal([toNobody.error?.code, notUsed.error?.code], ['target_not_connected', 'e2ee_not_used']);
});

test.run();
