import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * `produce` checks `kind` against `source` (a microphone is audio, a screen is video) and every codec of
 * `rtpParameters` against `kind`: otherwise a seated member would publish VP8 video as `kind: 'audio', source:
 * 'microphone'`, which needs only a seat: video in a room whose policy says `screenShare: 'disabled'` (or `owners`
 * for a non-moderator, or past the one-sharer rule), and every listener could consume it.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const liveProducers = new Map<string, types.Producer>();
mediasoup.observer.on('newworker', (worker) =>
  worker.observer.on('newrouter', (router) =>
    router.observer.on('newtransport', (transport) =>
      transport.observer.on('newproducer', (producer) => {
        liveProducers.set(producer.id, producer);
        producer.observer.once('close', () => liveProducers.delete(producer.id));
      }),
    ),
  ),
);

const VIDEO_CAPS = {
  codecs: [
    { kind: 'audio', mimeType: 'audio/opus', clockRate: 48_000, channels: 2, preferredPayloadType: 100 },
    { kind: 'video', mimeType: 'video/VP8', clockRate: 90_000, preferredPayloadType: 101 },
  ],
};
/** VP8 RTP parameters, sent as the microphone. */
const VP8_AS_MICROPHONE = { mid: '0', codecs: [{ mimeType: 'video/VP8', payloadType: 101, clockRate: 90_000 }], encodings: [{ ssrc: 7777 }] };

/** Opus first, VP8 after it: one foreign codec is enough to refuse. */
const OPUS_AND_VP8 = {
  mid: '1',
  codecs: [
    { mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 },
    { mimeType: 'video/VP8', payloadType: 101, clockRate: 90_000 },
  ],
  encodings: [{ ssrc: 7778 }],
};
const OPUS_AS_SCREEN = { mid: '2', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 7779 }] };
const OPUS = { mid: '3', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 7780 }] };
const VP8 = { mid: '4', codecs: [{ mimeType: 'video/VP8', payloadType: 101, clockRate: 90_000 }], encodings: [{ ssrc: 7781 }] };

const noScreens = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'disabled', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-review-mic-video', { directCalls: { enabled: false }, spaces: [{ id: 'no-screens', policy: noScreens }, { id: 'screens', policy: { ...noScreens, screenShare: 'speakers' } }] }));
});

test('screenShare disabled: VP8 video produced as kind audio / source microphone is refused (invalid_media_parameters), not published and consumable', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'no-screens'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  // Screen sharing is off in this room.
  assert.is((await speaker.request('screen.start')).error?.code, 'screen_disabled');
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: VP8_AS_MICROPHONE });

  const viewer = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'no-screens'), world.origin);
  assert.is((await viewer.request('room.join', { rtpCapabilities: VIDEO_CAPS })).ok, true);
  const recv = (await viewer.request('transport.create', { direction: 'recv' })).result?.transportId as string;
  const consumed = produced.ok ? await viewer.request('consume', { transportId: recv, producerId: produced.result?.producerId }) : undefined;
  const producerCodec = produced.ok ? liveProducers.get(produced.result?.producerId as string)?.rtpParameters.codecs[0]?.mimeType : undefined;
  const consumerCodec = (consumed?.result?.rtpParameters as { codecs?: Array<{ mimeType: string }> } | undefined)?.codecs?.[0]?.mimeType;
  speaker.close();
  viewer.close();
  assert.equal(
    { ok: produced.ok, code: produced.error?.code },
    { ok: false, code: 'invalid_media_parameters' },
    `produce kind audio with VP8 answered ok; the live "microphone" producer carries ${producerCodec}, and a listener consumed it as ${consumerCodec} (${JSON.stringify(consumed?.ok)})`,
  );
});

test('a microphone whose codecs mix opus with VP8 is refused invalid_media_parameters; opus alone is published', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'no-screens'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const mixed = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: OPUS_AND_VP8 });
  const opus = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: OPUS });
  speaker.close();
  assert.equal({ mixed: mixed.error?.code, opus: opus.ok }, { mixed: 'invalid_media_parameters', opus: true });
});

test('the sharer cannot publish opus as its screen (kind video): invalid_media_parameters; VP8 is published', async () => {
  const sharer = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'screens'), world.origin);
  assert.is((await sharer.request('room.join', { rtpCapabilities: {} })).ok, true);
  assert.is((await sharer.request('screen.start')).ok, true);
  const send = (await sharer.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const audio = await sharer.request('produce', { transportId: send, kind: 'video', source: 'screen', rtpParameters: OPUS_AS_SCREEN });
  const video = await sharer.request('produce', { transportId: send, kind: 'video', source: 'screen', rtpParameters: VP8 });
  sharer.close();
  assert.equal({ audio: audio.error?.code, video: video.ok }, { audio: 'invalid_media_parameters', video: true }, JSON.stringify(video.error));
});

test.run();
