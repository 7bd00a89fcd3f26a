import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Listeners beyond a router's consumer budget get a router of their own, fed by pipeToRouter from the main router (a
 * pipe transport pair, and a pipe consumer on the main router per producer). Once those listeners have left, nothing
 * made for them stays: that router goes with its pipes, and the speaker's packets are no longer copied to it.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;
let bobPage: RuntimeClient;

const live = { routers: new Set<types.Router>(), transports: new Set<types.Transport>(), consumers: new Set<types.Consumer>() };
mediasoup.observer.on('newworker', (worker) =>
  worker.observer.on('newrouter', (router) => {
    live.routers.add(router);
    router.observer.once('close', () => live.routers.delete(router));
    router.observer.on('newtransport', (transport) => {
      live.transports.add(transport);
      transport.observer.once('close', () => live.transports.delete(transport));
      transport.observer.on('newconsumer', (consumer) => {
        live.consumers.add(consumer);
        consumer.observer.once('close', () => live.consumers.delete(consumer));
      });
    });
  }),
);
const counts = () => ({ routers: live.routers.size, transports: live.transports.size, consumers: live.consumers.size });

const CAPS = { codecs: [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48_000, channels: 2, preferredPayloadType: 100 }] };
const MICROPHONE = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 6161 }] };

// A budget of 4 consumers a router: two recv transports of a room with 2 seats and no screen fill one.
withTestServer(test, (started) => ({ server } = started), productParts, { ...MEDIA_TEST_ENV, MEDIA_CONSUMERS_PER_ROUTER: '4' });
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-idle-router', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 5, maxSpeakerSeats: 2, floorControl: 'open', raiseHand: 'disabled', screenShare: 'disabled', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 } }],
  }));
  bobPage = await (await (await runtimePerson(server, 'listener-bob')).runtime(world)).open();
});

test('listeners who spread the room to more routers leave: their routers, pipe transports and pipe consumers go with them', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'room'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: CAPS })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE });
  assert.is(produced.ok, true, JSON.stringify(produced.error));
  const alone = counts();

  const listeners = await Promise.all([liaPage, bobPage].map(async (page) => MediaControlClient.connect(server.url, await mediaGrant(page, 'room', ['media:connect', 'media:join-space']), world.origin)));
  for (const listener of listeners) {
    assert.is((await listener.request('room.join', { rtpCapabilities: CAPS })).ok, true);
    for (let i = 0; i < 2; i++) {
      const recv = (await listener.request('transport.create', { direction: 'recv' })).result?.transportId as string;
      const consumed = await listener.request('consume', { transportId: recv, producerId: produced.result?.producerId });
      assert.is(consumed.ok, true, JSON.stringify(consumed.error));
    }
  }
  const spread = counts();
  assert.ok(spread.routers > alone.routers, `the listeners spread the room (${JSON.stringify(spread)})`);

  for (const listener of listeners) assert.is((await listener.request('room.leave')).ok, true);
  const after = await waitFor(() => {
    const now = counts();
    return now.consumers === alone.consumers && now.transports === alone.transports && now.routers === alone.routers ? now : false;
  }, 'what the listeners left to go', 3000).catch(() => counts());
  for (const listener of listeners) listener.close();
  speaker.close();
  assert.equal(after, alone, `alone ${JSON.stringify(alone)}, spread ${JSON.stringify(spread)}`);
});

test.run();
