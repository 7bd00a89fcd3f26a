import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { TRANSPORTS_PER_DIRECTION } from '../../media/control/media-control.messages.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * One member cannot multiply the SFU's work: `consume` asked again for a producer the member already receives on that
 * transport answers the consumer it has (not another copy of every packet; the protocol has no consumer.close), and
 * a member holds at most TRANSPORTS_PER_DIRECTION transports per direction, since every recv transport reserves
 * consumers in a router's budget and enough of them would make the room add routers.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const liveConsumers = new Set<types.Consumer>();
const routers = new Set<types.Router>();
mediasoup.observer.on('newworker', (worker) =>
  worker.observer.on('newrouter', (router) => {
    routers.add(router);
    router.observer.once('close', () => routers.delete(router));
    router.observer.on('newtransport', (transport) =>
      transport.observer.on('newconsumer', (consumer) => {
        liveConsumers.add(consumer);
        consumer.observer.once('close', () => liveConsumers.delete(consumer));
      }),
    );
  }),
);

const OPUS_CAPS = { codecs: [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48_000, channels: 2, preferredPayloadType: 100 }] };
const MIC = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 4242 }] };
const policy = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'moderated', raiseHand: 'enabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-review-amp', {
    directCalls: { enabled: false },
    spaces: [{ id: 'dup', policy }, { id: 'spread', policy }],
  }));
});

test('a listener asking 20 times for one producer on one recv transport holds one consumer of it, named in every answer', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'dup'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: {} })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MIC });
  const producerId = produced.result?.producerId as string;
  assert.ok(producerId, JSON.stringify(produced.error));

  const listener = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'dup', ['media:connect', 'media:join-space']), world.origin);
  assert.is((await listener.request('room.join', { rtpCapabilities: OPUS_CAPS })).ok, true);
  const recv = (await listener.request('transport.create', { direction: 'recv' })).result?.transportId as string;
  const before = liveConsumers.size;
  const answers = await Promise.all(Array.from({ length: 20 }, () => listener.request('consume', { transportId: recv, producerId })));
  const consumerIds = new Set(answers.map((a) => a.result?.consumerId));
  const copies = liveConsumers.size - before;
  const again = await listener.request('consume', { transportId: recv, producerId });
  speaker.close();
  listener.close();
  assert.equal({ ok: answers.every((a) => a.ok), consumers: consumerIds.size, copies }, { ok: true, consumers: 1, copies: 1 });
  assert.ok(consumerIds.has(again.result?.consumerId), 'asked again later: the same consumer');
});

test(`a member holds at most ${TRANSPORTS_PER_DIRECTION} transports per direction (transport_limit), so a listener cannot make the room add routers`, async () => {
  const listener = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'spread', ['media:connect', 'media:join-space']), world.origin);
  assert.is((await listener.request('room.join', { rtpCapabilities: OPUS_CAPS })).ok, true);
  const routersBefore = routers.size;
  // Budget 500 consumers per router; each recv transport reserves maxSpeakerSeats + 1 = 5: 101 would need a second router.
  const answers = await Promise.all(Array.from({ length: 120 }, () => listener.request('transport.create', { direction: 'recv' })));
  const made = answers.filter((a) => a.ok).length;
  const refusals = new Set(answers.filter((a) => !a.ok).map((a) => a.error?.code));
  const send = await listener.request('transport.create', { direction: 'send' });
  const added = routers.size - routersBefore;
  listener.close();
  assert.equal({ made, refusals: [...refusals], added, send: send.ok }, { made: TRANSPORTS_PER_DIRECTION, refusals: ['transport_limit'], added: 0, send: true });
});

test.run();
