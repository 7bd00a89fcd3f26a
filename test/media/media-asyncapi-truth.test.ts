import { decode, encode } from '@msgpack/msgpack';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { openUncut } from '../support/uws-upgrade-cut.js';

/**
 * The served `media-v2-data-plane` AsyncAPI document against what the control socket actually does.
 * Each test FAILS while the document and the server disagree.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let doc: { channels: Record<string, { description: string }>; info: { description: string }; components: { messages: Record<string, { name: string; payload: { properties: Record<string, { enum?: string[] }> } }> } };
const MICROPHONE_RTP = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 1111 }] };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage } = await mediaWorld(server, 'media-doc-truth', {
    directCalls: { enabled: false },
    spaces: ['town-hall', 'side-room'].map((id) => ({ id, policy: { mode: 'stage', maxParticipants: 150, maxSpeakerSeats: 2, floorControl: 'moderated', raiseHand: 'enabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } })),
  }));
  doc = (await (await fetch(`${server.url}/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane`)).json()) as typeof doc;
});

test('`ping` is answered with a `response`; the documented server message `pong` is never sent', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'town-hall'), world.origin);
  const answer = await conn.request('ping');
  assert.is(answer.type, 'response');
  await new Promise((r) => setTimeout(r, 200));
  const pongs = conn.pushes.filter((p) => (p.type as string) === 'pong').length;
  conn.close();
  assert.is(pongs, 0, 'the server sends no pong');
  const documented = Object.values(doc.components.messages).map((m) => m.name);
  assert.not.ok(documented.includes('pong'), 'yet the document lists the server message `pong` (operation sendPong)');
});

test('the socket negotiates registry.v1.msgpack (binary frames), though the document says frames are JSON text', async () => {
  const grant = await mediaGrant(modPage, 'town-hall');
  let hello: Promise<{ binary: boolean; message: Record<string, unknown> }> | undefined;
  // Opened again if uWS cuts it right after its upgrade (a 1006 that would otherwise stand for the 1003 under test).
  const { ws, closed } = await openUncut(
    () => new WebSocket(`${server.url.replace(/^http/, 'ws')}/v1/plugins/media/control`, ['registry.v1.msgpack', `registry.bearer.${grant}`], { headers: { origin: world.origin } }),
    (socket) => {
      hello = new Promise((resolve) => socket.once('message', (data, isBinary) => resolve({ binary: isBinary, message: decode(data as Buffer) as Record<string, unknown> })));
    },
  );
  const first = await hello!;
  assert.is(ws.protocol, 'registry.v1.msgpack');
  assert.is(first.binary, true);
  assert.is(first.message.type, 'hello');
  ws.send(encode({ type: 'ping', id: 'p1' }));
  // A text frame on the binary codec: closed 1003.
  ws.send(JSON.stringify({ type: 'ping', id: 'p2' }));
  assert.is(await closed, 1003);
  assert.match(doc.info.description, /msgpack/, 'the document names only registry.v1.json');
});

test('a JSON connection sending a binary frame is closed 1003, a close code the document does not list', async () => {
  const grant = await mediaGrant(modPage, 'town-hall');
  let hello: Promise<void> | undefined;
  const { ws, closed } = await openUncut(
    () => new WebSocket(`${server.url.replace(/^http/, 'ws')}/v1/plugins/media/control`, ['registry.v1.json', `registry.bearer.${grant}`], { headers: { origin: world.origin } }),
    (socket) => {
      hello = new Promise((resolve) => socket.once('message', () => resolve()));
    },
  );
  await hello;
  ws.send(Buffer.from('{"type":"ping","id":"x"}'), { binary: true });
  assert.is(await closed, 1003);
  assert.match(doc.info.description, /Close codes:[^\n]*1003/, 'Close codes list has no 1003');
});

test('refusal codes the server answers on `response.error.code` are not in the document ("listed with the room rules below")', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'town-hall'), world.origin);
  const notJoined = await conn.request('transport.create', { direction: 'send' });
  assert.is(notJoined.ok, false);
  assert.ok((await conn.request('room.join', { rtpCapabilities: {} })).ok);
  const noTransport = await conn.request('transport.connect', { transportId: 'nope', dtlsParameters: { fingerprints: [{ algorithm: 'sha-256', value: Array(32).fill('AB').join(':') }] } });
  const noE2ee = await conn.request('e2ee.key', { to: 'act_x', envelope: 'x' });
  conn.close();
  const codes = [notJoined.error?.code, noTransport.error?.code, noE2ee.error?.code];
  assert.equal(codes, ['not_joined', 'transport_not_found', 'e2ee_not_used']);
  const missing = codes.filter((c) => !doc.info.description.includes(String(c)));
  assert.equal(missing, [], `codes sent but not documented: ${missing.join(', ')}`);
});

test('a seat lost while publishing closes the producer (producer.removed) and sends no media.reset; the document lists only worker_lost', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'town-hall'), world.origin);
  assert.ok((await conn.request('room.join', { rtpCapabilities: {} })).ok);
  const transport = await conn.request('transport.create', { direction: 'send' });
  const produced = await conn.request('produce', { transportId: transport.result?.transportId, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP });
  assert.ok(produced.ok, JSON.stringify(produced.error));
  assert.ok((await conn.request('floor.release')).ok);
  await new Promise((r) => setTimeout(r, 500));
  const resets = conn.pushes.filter((p) => p.type === 'media.reset');
  conn.close();
  const reasons = doc.components.messages.serverMediaReset!.payload.properties.reason!.enum!;
  assert.equal(reasons, ['worker_lost'], 'the document lists only the reason the server sends');
  assert.equal(resets, [], 'the server sends no media.reset for a lost seat');
});

test('one connection per person in an Environment, as documented: a connection to another scope replaces the first (4409)', async () => {
  assert.match(doc.channels.control!.description, /One connection per person in an Environment/);
  const first = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'town-hall'), world.origin);
  const second = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'side-room'), world.origin);
  const closed = await Promise.race([first.closed, new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000))]);
  second.close();
  first.close();
  assert.ok(closed !== undefined, 'the town-hall connection was replaced by the one to side-room');
});

test.run();
