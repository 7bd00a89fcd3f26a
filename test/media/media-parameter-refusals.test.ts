import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Parameters that pass mediasoup's validator but that the worker refuses (a MID or SSRC the send transport already
 * carries, simulcast rids on opus), and DTLS parameters of the wrong shape, are the client's mistake: answered
 * invalid_media_parameters (DTLS: validation_failed before anything runs), never internal_error (the server-failure
 * answer, logged at error level with a stack).
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;

const opus = { mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 };
const vp8 = { mimeType: 'video/VP8', payloadType: 101, clockRate: 90_000 };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage } = await mediaWorld(server, 'media-review-produce', {
    directCalls: { enabled: false },
    spaces: [
      {
        id: 'meet',
        policy: { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 },
      },
    ],
  }));
});

test('produce with a MID / SSRC already on the transport, simulcast opus: invalid_media_parameters; a second microphone: producer_exists; a null DTLS fingerprint: validation_failed; never internal_error', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'meet'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const transportId = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const first = await speaker.request('produce', { transportId, kind: 'audio', source: 'microphone', rtpParameters: { mid: '0', codecs: [opus], encodings: [{ ssrc: 1111 }] } });
  assert.is(first.ok, true, JSON.stringify(first.error));
  const codes: Record<string, string | undefined> = {};
  // A client retrying its microphone is refused producer_exists before the worker sees it (one producer per source):
  // the worker's own MID and SSRC refusals are reached through the other source, the screen.
  codes.retry = (await speaker.request('produce', { transportId, kind: 'audio', source: 'microphone', rtpParameters: { mid: '0', codecs: [opus], encodings: [{ ssrc: 2222 }] } })).error?.code;
  assert.is((await speaker.request('screen.start')).ok, true);
  codes.sameMid = (await speaker.request('produce', { transportId, kind: 'video', source: 'screen', rtpParameters: { mid: '0', codecs: [vp8], encodings: [{ ssrc: 2222 }] } })).error?.code;
  codes.sameSsrc = (await speaker.request('produce', { transportId, kind: 'video', source: 'screen', rtpParameters: { mid: '1', codecs: [vp8], encodings: [{ ssrc: 1111 }] } })).error?.code;
  assert.is((await speaker.request('producer.close', { producerId: first.result?.producerId })).ok, true);
  codes.simulcastOpus = (await speaker.request('produce', { transportId, kind: 'audio', source: 'microphone', rtpParameters: { mid: '2', codecs: [opus], encodings: [{ rid: 'a' }, { rid: 'b' }] } })).error?.code;
  // A hostile DTLS parameter object: refused by the protocol's schema (an unreadable message has no response).
  speaker.sendRaw(JSON.stringify({ type: 'transport.connect', id: 'bad-dtls', transportId, dtlsParameters: { fingerprints: [null] } }));
  const refusal = await waitFor(() => speaker.pushes.find((p) => p.type === 'error'), 'the refusal of the malformed DTLS parameters');
  codes.nullFingerprint = refusal.type === 'error' ? refusal.code : undefined;
  // Still usable afterwards, and a well-formed connect goes through.
  const fingerprint = Array.from({ length: 32 }, () => 'AB').join(':');
  assert.is((await speaker.request('transport.connect', { transportId, dtlsParameters: { role: 'client', fingerprints: [{ algorithm: 'sha-256', value: fingerprint }] } })).ok, true);
  speaker.close();
  assert.equal(codes, { retry: 'producer_exists', sameMid: 'invalid_media_parameters', sameSsrc: 'invalid_media_parameters', simulcastOpus: 'invalid_media_parameters', nullFingerprint: 'validation_failed' });
});

test('an encoding maxBitrate that is not an integer is invalid_media_parameters and leaves the worker serving everyone: mediasoup fails it half-way through a request it builds in the worker channel\'s one shared buffer, which refuses every later request then', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'meet'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const transportId = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const codes: Record<string, string | undefined> = {};
  for (const [name, maxBitrate] of [['fraction', 1.5], ['text', '64k'], ['null', null]] as const) {
    const refused = await speaker.request('produce', { transportId, kind: 'audio', source: 'microphone', rtpParameters: { mid: '5', codecs: [opus], encodings: [{ ssrc: 5555, maxBitrate }] } });
    codes[name] = refused.error?.code;
  }
  // The worker still answers: another transport, and the same microphone with a whole bitrate.
  const recv = await speaker.request('transport.create', { direction: 'recv' });
  codes.transportAfter = recv.ok ? 'ok' : recv.error?.code;
  const produced = await speaker.request('produce', { transportId, kind: 'audio', source: 'microphone', rtpParameters: { mid: '5', codecs: [opus], encodings: [{ ssrc: 5555, maxBitrate: 64_000 }] } });
  codes.produceAfter = produced.ok ? 'ok' : produced.error?.code;
  speaker.close();
  assert.equal(codes, { fraction: 'invalid_media_parameters', text: 'invalid_media_parameters', null: 'invalid_media_parameters', transportAfter: 'ok', produceAfter: 'ok' });
});

test('a screen of more simulcast encodings than a consumer can describe (mediasoup: at most 99 spatial layers) is refused invalid_media_parameters when produced, not accepted and then failed internal_error at every listener\'s consume', async () => {
  const sharer = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'meet'), world.origin);
  assert.is((await sharer.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await sharer.request('transport.create', { direction: 'send' })).result?.transportId as string;
  assert.is((await sharer.request('screen.start')).ok, true);
  const encodings = Array.from({ length: 100 }, (_, i) => ({ ssrc: 70_000 + i }));
  const produced = await sharer.request('produce', { transportId: send, kind: 'video', source: 'screen', rtpParameters: { mid: '9', codecs: [vp8], encodings } });
  const outcome: Record<string, string | undefined> = { produce: produced.ok ? 'ok' : produced.error?.code };
  if (produced.ok) {
    // The sharer consumes its own screen as any listener would: the same consumer parameters, on the same worker.
    const caps = (await sharer.request('room.join', { rtpCapabilities: {} })).result?.routerRtpCapabilities;
    assert.is((await sharer.request('room.join', { rtpCapabilities: caps })).ok, true);
    const recv = (await sharer.request('transport.create', { direction: 'recv' })).result?.transportId as string;
    const consumed = await sharer.request('consume', { transportId: recv, producerId: produced.result?.producerId });
    outcome.consume = consumed.ok ? 'ok' : consumed.error?.code;
  }
  const three = await sharer.request('produce', { transportId: send, kind: 'video', source: 'screen', rtpParameters: { mid: '9', codecs: [vp8], encodings: encodings.slice(0, 3) } });
  outcome.threeLayers = three.ok ? 'ok' : three.error?.code;
  sharer.close();
  assert.equal(outcome, { produce: 'invalid_media_parameters', threeLayers: 'ok' });
});

test.run();
