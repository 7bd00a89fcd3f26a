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
 * A member publishes "the microphone" (needs a seat) and "the screen" (needs to be the sharer): one producer per source
 * at a time, a second refused `producer_exists`. Without that bound one seated member made any number of microphone
 * producers on its send transport (each one a fresh MID/SSRC), every one announced to everyone, and recv transport
 * placement reserves max(seats + 1, producers in the room) consumers per transport: the amplification
 * TRANSPORTS_PER_DIRECTION was added to stop ("so a listener cannot make the room add routers") came straight back
 * through the producer count.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const routers = new Set<types.Router>();
mediasoup.observer.on('newworker', (worker) =>
  worker.observer.on('newrouter', (router) => {
    routers.add(router);
    router.observer.once('close', () => routers.delete(router));
  }),
);

const OPUS_CAPS = { codecs: [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48_000, channels: 2, preferredPayloadType: 100 }] };
const SCREEN = { mid: 's', codecs: [{ mimeType: 'video/VP8', payloadType: 101, clockRate: 90_000 }], encodings: [{ ssrc: 20_000 }] };
const mic = (n: number) => ({ mid: String(n), codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 10_000 + n }] });
const policy = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-review-producers', { directCalls: { enabled: false }, spaces: [{ id: 'many', policy }] }));
});

test('one seated member holds one microphone producer: a second is refused producer_exists while the first is live (no router spread from one speaker and one listener)', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'many'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const first = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: mic(0) });
  assert.is(first.ok, true, JSON.stringify(first.error));
  let accepted = 1;
  let refusal: string | undefined;
  for (let i = 1; i < 260; i++) {
    const more = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: mic(i) });
    if (more.ok) accepted++;
    else {
      refusal = more.error?.code;
      break;
    }
  }
  // One listener, its two allowed recv transports.
  const listener = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'many', ['media:connect', 'media:join-space']), world.origin);
  assert.is((await listener.request('room.join', { rtpCapabilities: OPUS_CAPS })).ok, true);
  const routersBefore = routers.size;
  await listener.request('transport.create', { direction: 'recv' });
  await listener.request('transport.create', { direction: 'recv' });
  const added = routers.size - routersBefore;
  speaker.close();
  listener.close();
  assert.equal(
    { microphoneProducersOfOneMember: accepted, refusal, routersAddedByOneListener: added },
    { microphoneProducersOfOneMember: 1, refusal: 'producer_exists', routersAddedByOneListener: 0 },
    `one member published ${accepted} microphones at once`,
  );
});

test('two microphone produce requests sent at once: exactly one is published, the other is refused producer_exists', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'many'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const answers = await Promise.all([1, 2, 3].map((n) => speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: mic(n) })));
  speaker.close();
  assert.equal(answers.map((a) => (a.ok ? 'published' : a.error?.code)).sort(), ['producer_exists', 'producer_exists', 'published']);
});

test('a member publishes its microphone and its screen at once; after producer.close the microphone may be published again', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'many'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  assert.is((await speaker.request('screen.start')).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const microphone = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: mic(4) });
  const screen = await speaker.request('produce', { transportId: send, kind: 'video', source: 'screen', rtpParameters: SCREEN });
  const secondScreen = await speaker.request('produce', { transportId: send, kind: 'video', source: 'screen', rtpParameters: { ...SCREEN, mid: 's2', encodings: [{ ssrc: 20_001 }] } });
  assert.is((await speaker.request('producer.close', { producerId: microphone.result?.producerId })).ok, true);
  const again = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: mic(5) });
  speaker.close();
  assert.equal(
    { microphone: microphone.ok, screen: screen.ok, secondScreen: secondScreen.error?.code, again: again.ok },
    { microphone: true, screen: true, secondScreen: 'producer_exists', again: true },
    JSON.stringify([microphone.error, screen.error, again.error]),
  );
});

test.run();
