import type { AddressInfo } from 'node:net';
import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type WebSocket, WebSocketServer } from 'ws';
import {
  MEDIA_LIMITS,
  MEDIA_PROTOCOL_VERSION,
  MediaV2ClientMessageSchema,
  type MediaV2ServerMessage,
  type RoomView,
} from '../../media/control/media-control.messages.js';
import { roomStateMessages } from '../../media/control/room-state-pages.js';
import { resolveWorkerBinary } from '../../media/worker-binary.js';
import { launchChromium, type ChromiumHandle } from '../support/chromium.js';
import { LoopbackSfuPeer } from '../support/loopback-sfu.js';
import { MediaPageServer } from '../support/media-page.js';
import { waitFor } from '../support/wait.js';

/**
 * The test page's control-protocol client (test/media/browser/control-client.ts) in Chromium, against a scripted
 * counterpart: a `ws` server that speaks the protocol's messages and answers media requests with a real mediasoup
 * router. The counterpart is what this file is not about; the real control plane's tests use the same page.
 */
const BEARER = 'registry.bearer.';
const mediaCodecs: types.RouterRtpCodecCapability[] = [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2 }];

interface Connection {
  readonly grant: string;
  readonly origin: string | undefined;
  readonly socket: WebSocket;
  peer?: LoopbackSfuPeer;
}

let worker: types.Worker;
let router: types.Router;
let browser: ChromiumHandle;
let pages: MediaPageServer;
let control: WebSocketServer;
let controlUrl: string;
const connections: Connection[] = [];
const producers: { producerId: string; memberId: string }[] = [];
let revision = 0;

test.before(async () => {
  worker = await mediasoup.createWorker({ workerBin: resolveWorkerBinary().path, logLevel: 'warn' });
  router = await worker.createRouter({ mediaCodecs });
  [browser, pages] = await Promise.all([launchChromium(), MediaPageServer.start()]);
  control = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    // A browser fails the handshake unless the server selects one of the subprotocols it offered.
    handleProtocols: (offered) => [...offered].find((p) => p.startsWith(BEARER)) ?? false,
  });
  await new Promise((resolve) => control.once('listening', resolve));
  controlUrl = `ws://127.0.0.1:${(control.address() as AddressInfo).port}/v1/plugins/media/control`;
  control.on('connection', (socket, request) => {
    const connection: Connection = { grant: socket.protocol.slice(BEARER.length), origin: request.headers.origin, socket };
    connections.push(connection);
    socket.on('message', (data) => void answer(connection, data.toString()));
    send(socket, {
      type: 'hello',
      protocol: MEDIA_PROTOCOL_VERSION,
      memberId: memberOf(connection),
      scope: 'space:stage',
      grantExpiresAt: new Date(Date.now() + 600_000).toISOString(),
      limits: { maxMessageBytes: 16_384, requestsPerMinute: 600 },
    });
  });
});
test.after(async () => {
  await pages?.close();
  for (const c of connections) {
    c.peer?.close();
    c.socket.terminate();
  }
  await new Promise((resolve) => control?.close(resolve));
  await browser?.close();
  worker?.close();
});

function memberOf(connection: Connection): string {
  return `m-${connection.grant}`;
}

function send(socket: WebSocket, message: MediaV2ServerMessage): void {
  socket.send(JSON.stringify(message));
}

function broadcast(message: MediaV2ServerMessage, except?: Connection): void {
  for (const c of connections) if (c !== except && c.socket.readyState === c.socket.OPEN) send(c.socket, message);
}

function roomView(members: readonly string[]): RoomView {
  return {
    roomId: 'room-1',
    scope: 'space:stage',
    revision: ++revision,
    mode: 'stage',
    policy: {
      maxParticipants: 150,
      maxSpeakerSeats: 4,
      floorControl: 'moderated',
      raiseHand: 'disabled',
      screenShare: 'speakers',
      screenProfile: 'slides',
      encryption: 'transport',
      reconnectGraceSeconds: 30,
    },
    members: members.map((memberId) => ({
      memberId,
      displayName: memberId,
      role: 'speaker',
      seated: true,
      connection: 'connected',
      graceUntil: null,
      handRaisedAt: null,
      handPosition: null,
      offer: null,
    })),
    handQueue: [],
    offers: [],
    screenSharer: null,
  };
}

async function answer(connection: Connection, text: string): Promise<void> {
  const message = MediaV2ClientMessageSchema.parse(JSON.parse(text));
  const { id } = message;
  const reply = (result: Record<string, unknown>) => send(connection.socket, { type: 'response', id, ok: true, result });
  try {
    switch (message.type) {
      case 'room.join': {
        // The page joins with its native receive capabilities, before its Device exists.
        connection.peer = new LoopbackSfuPeer(router, message.rtpCapabilities as types.RtpCapabilities);
        // As the server does: everyone gets the view in pages, the joiner before its answer.
        const room = roomView(connections.filter((c) => c.peer).map(memberOf));
        for (const page of roomStateMessages(room, MEDIA_LIMITS.maxMessageBytes)) send(connection.socket, page);
        reply({ routerRtpCapabilities: router.rtpCapabilities, revision: room.revision });
        for (const page of roomStateMessages(room, MEDIA_LIMITS.maxMessageBytes)) broadcast(page, connection);
        for (const p of producers) if (p.memberId !== memberOf(connection)) send(connection.socket, { type: 'producer.added', producer: { ...p, kind: 'audio', source: 'microphone' } });
        return;
      }
      case 'hand.raise':
        send(connection.socket, { type: 'response', id, ok: false, error: { code: 'raise_hand_disabled', message: 'this space has no raise-hand queue', requestId: 'req_fake-refusal-01' } });
        return;
      case 'transport.create':
      case 'transport.connect':
      case 'produce':
      case 'consume':
      case 'consumer.resume': {
        if (!connection.peer) throw new Error('join first');
        const { type: _type, id: _id, ...payload } = message;
        const result = await connection.peer.handle(message.type, payload);
        reply(result);
        if (message.type === 'produce') {
          const producer = { producerId: String(result.producerId), memberId: memberOf(connection) };
          producers.push(producer);
          broadcast({ type: 'producer.added', producer: { ...producer, kind: 'audio', source: 'microphone' } }, connection);
        }
        return;
      }
      default:
        reply({});
    }
  } catch (error) {
    send(connection.socket, { type: 'response', id, ok: false, error: { code: 'failed', message: String(error), requestId: 'req_fake-refusal-02' } });
  }
}

test('handshake: the grant rides as subprotocol registry.bearer.<grant>, the Origin is the page server, hello arrives', async () => {
  const page = await pages.open(browser);
  const hello = await page.api.connectControl(controlUrl, 'handshake');
  assert.is(hello.memberId, 'm-handshake');
  const connection = connections.find((c) => c.grant === 'handshake');
  assert.is(connection?.origin, pages.origin);
  assert.equal(await page.api.hello(), hello);
  assert.equal(await page.api.protocolViolations(), []);
});

test('requests are matched by id; refusals are recorded and surface through expectRefusal; bad frames are violations', async () => {
  const page = await pages.open(browser);
  await page.api.connectControl(controlUrl, 'requests');
  const [first, second] = await Promise.all([page.api.request('ping'), page.api.request('floor.take')]);
  assert.equal([first?.type, first?.ok, second?.type, second?.ok], ['ping', true, 'floor.take', true]);
  assert.is.not(first?.id, second?.id);

  const refusal = await page.expectRefusal('hand.raise', () => page.api.raiseHand());
  assert.equal(refusal, { code: 'raise_hand_disabled', message: 'this space has no raise-hand queue', requestId: 'req_fake-refusal-01' });

  const socket = connections.find((c) => c.grant === 'requests')?.socket;
  socket?.send(JSON.stringify({ type: 'room.state', room: { revision: 1 } }));
  socket?.send('not json');
  await waitFor(async () => (await page.api.protocolViolations()).length === 2, 'both bad frames to be reported');
});

test('over the socket: join, publishMicrophone on one page, consumeAll on another hears it; both hold the newest room view, put together from its pages', async () => {
  const alice = await pages.open(browser);
  const bob = await pages.open(browser);
  await alice.api.connectControl(controlUrl, 'alice');
  await bob.api.connectControl(controlUrl, 'bob');
  const joined = await alice.api.join();
  assert.ok('routerRtpCapabilities' in joined);
  await bob.api.join();
  await bob.api.consumeAll();

  const { producerId } = await alice.api.publishMicrophone();
  const added = await bob.nextPush('producer.added');
  assert.is(added.producer.producerId, producerId);
  const heard = await waitFor(async () => {
    const [m] = await bob.api.consumerStats();
    return m && m.packetsReceived > 0 && m.totalAudioEnergy > 0 && m;
  }, 'bob to hear alice', 15_000);
  assert.is(heard.producerId, producerId);

  // Alice learnt of Bob's join from a push, Bob from the push before his join answer: both hold the newest view.
  const [aliceView, bobView] = [await alice.api.roomState(), await bob.api.roomState()];
  for (const room of [aliceView, bobView]) assert.ok(room?.members.some((m) => m.memberId === 'm-alice') && room.members.some((m) => m.memberId === 'm-bob'));
  assert.is(aliceView?.revision, Math.max(...(await alice.api.pushes()).flatMap((p) => (p.type === 'room.state' ? [p.room.revision] : []))));
  assert.is(bobView?.revision, aliceView?.revision);
  assert.equal(await bob.api.consumeErrors(), []);
  assert.equal([...(await alice.api.protocolViolations()), ...(await bob.api.protocolViolations())], []);
  assert.equal([...alice.errors(), ...bob.errors()], []);
});

test('disconnect closes the socket and records the close; reconnect opens a new one with the new grant', async () => {
  const page = await pages.open(browser);
  await page.api.connectControl(controlUrl, 'dropper');
  await page.api.disconnect();
  const closed = await waitFor(() => page.api.closed().then((c) => c ?? undefined), 'the close to be recorded');
  assert.ok(closed.code > 0);
  const hello = await page.api.reconnect('dropper-2');
  assert.is(hello.memberId, 'm-dropper-2');
  assert.is(await page.api.closed(), null);
  await page.api.ping();
});

test.run();
