import type { Socket } from 'node:dgram';
import { once } from 'node:events';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AUDIO_LEVEL_EXTENSION } from '../../media/media-codecs.js';
import { MediaError } from '../../media/media-error.js';
import { RoomMedia, type AudioLevels, type ConsumerParams, type MediaLost, type ProducerClosed } from '../../media/room-media.js';
import { screenEncodingHint } from '../../media/screen-profile.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import { rejects } from '../support/assert.js';
import { isRtp, OPUS_PAYLOAD_TYPE, rtpSsrc, startRtpStream } from '../support/rtp.js';
import { waitFor } from '../support/wait.js';
import { bindLoopback, nextMessage } from '../support/webrtc-wire.js';

/**
 * Room media on a pool of two real workers: speakers send synthetic opus RTP into PlainTransports from Node sockets,
 * listeners' PlainTransports send what they consume to Node sockets on loopback.
 */
const logger = pino({ level: 'silent' });
let pool: MediaWorkerPool;
const sockets: Socket[] = [];
const streams: { stop(): void }[] = [];

test.before(async () => {
  pool = await MediaWorkerPool.create({ size: 2, logger });
});
test.after.each(() => {
  for (const s of streams.splice(0)) s.stop();
  for (const s of sockets.splice(0)) s.close();
});
test.after(() => pool?.close());

async function socket(): Promise<Socket> {
  const s = await bindLoopback();
  sockets.push(s);
  return s;
}

/** A speaker: plain send transport, an opus producer with `ssrc`, and packets flowing into it. */
async function speak(room: RoomMedia, peerId: string, ssrc: number, audioLevel?: number): Promise<string> {
  const transport = await room.createPlainTransport(peerId, 'send');
  const { id } = await room.produce(peerId, transport.id, {
    kind: 'audio',
    rtpParameters: {
      codecs: [{ mimeType: 'audio/opus', payloadType: OPUS_PAYLOAD_TYPE, clockRate: 48000, channels: 2 }],
      encodings: [{ ssrc }],
      headerExtensions: audioLevel === undefined ? [] : [{ uri: AUDIO_LEVEL_EXTENSION, id: 1 }],
    },
    appData: { source: 'microphone' },
  });
  streams.push(startRtpStream(await socket(), transport.port, ssrc, { audioLevel }));
  return id;
}

interface Listener {
  readonly sink: Socket;
  readonly transportId: string;
  readonly consumers: ConsumerParams[];
}

/** A listener: plain recv transport sending to a Node socket, resumed consumers of `producerIds`. */
async function listen(room: RoomMedia, peerId: string, producerIds: readonly string[]): Promise<Listener> {
  const sink = await socket();
  const transport = await room.createPlainTransport(peerId, 'recv');
  await room.connectPlainTransport(peerId, transport.id, { ip: '127.0.0.1', port: sink.address().port });
  const consumers: ConsumerParams[] = [];
  for (const producerId of producerIds) {
    const consumer = await room.consume(peerId, transport.id, producerId, room.rtpCapabilities);
    await room.resumeConsumer(peerId, consumer.id);
    consumers.push(consumer);
  }
  return { sink, transportId: transport.id, consumers };
}

function consumerSsrc(consumer: ConsumerParams): number {
  return consumer.rtpParameters.encodings?.[0]?.ssrc ?? -1;
}

/** The next RTP packet at the listener's sink carries its consumer's SSRC. */
async function receives(listener: Listener, index = 0): Promise<void> {
  const ssrc = consumerSsrc(listener.consumers[index]!);
  await nextMessage(listener.sink, (m) => isRtp(m) && rtpSsrc(m) === ssrc, `RTP with SSRC ${ssrc}`, 5000);
}

test('transport mode: opus and VP8 with the audio level extension; WebRTC transport params for mediasoup-client', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'caps', encryption: 'transport' });
  try {
    const caps = room.rtpCapabilities;
    const mimes = caps.codecs?.map((c) => c.mimeType.toLowerCase()) ?? [];
    assert.ok(mimes.includes('audio/opus') && mimes.includes('video/vp8') && mimes.includes('video/h264'));
    assert.ok(caps.headerExtensions?.some((e) => e.uri === AUDIO_LEVEL_EXTENSION));

    const send = await room.createTransport('alice', 'send');
    assert.is(send.iceCandidates[0]?.address, '127.0.0.1');
    assert.is(send.iceCandidates[0]?.protocol, 'udp');
    assert.ok(send.iceParameters.usernameFragment && send.dtlsParameters.fingerprints.length > 0);
    assert.is(send.sctpParameters, undefined);
    await room.connectTransport('alice', send.id, {
      role: 'client',
      fingerprints: [{ algorithm: 'sha-256', value: Array(32).fill('AB').join(':') }],
    });
    await rejects(
      () => room.consume('alice', send.id, 'nope', caps),
      (e: unknown) => e instanceof MediaError && e.code === 'wrong_direction',
    );
    await rejects(
      () => room.produce('alice', send.id, { kind: 'audio', rtpParameters: { codecs: [] }, appData: { source: 'screen' } }),
      (e: unknown) => e instanceof MediaError && e.code === 'invalid_source',
    );
    assert.throws(() => room.closeProducer('bob', 'x'), (e: unknown) => e instanceof MediaError && e.code === 'producer_not_found');
  } finally {
    room.close();
  }
});

test('produce → consume forwards RTP end to end; audio levels name the speaking peer', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'forward', encryption: 'transport', audioLevelIntervalMs: 200 });
  try {
    const levels = new Promise<AudioLevels>((resolve) => room.on('audiolevels', (e) => e.levels.length > 0 && resolve(e)));
    const producerId = await speak(room, 'speaker', 1111, 30);
    const listener = await listen(room, 'listener', [producerId]);
    await receives(listener);
    assert.is(listener.consumers[0]!.producerId, producerId);
    assert.ok(listener.consumers[0]!.paused);
    const heard = await levels;
    assert.equal(heard.levels.map((l) => [l.peerId, l.producerId, l.volume]), [['speaker', producerId, -30]]);
    assert.is(room.routers().length, 1, 'within budget everything stays on the main router');
  } finally {
    room.close();
  }
});

test('budget of 3: the fourth listener gets a router on the other worker and RTP arrives through pipeToRouter', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'spread', encryption: 'transport', consumerBudget: 3 });
  try {
    const producerId = await speak(room, 'speaker', 2222);
    const listeners: Listener[] = [];
    for (const n of [1, 2, 3, 4]) listeners.push(await listen(room, `listener-${n}`, [producerId]));
    const [main, second] = room.routers();
    assert.is(room.routers().length, 2);
    assert.is.not(second!.pid, main!.pid, 'the second router is on the other worker');
    assert.is(second!.pipedProducers, 1);
    assert.is(second!.consumers, 1);
    assert.is(main!.consumers, 4, 'three listeners and the pipe consumer');
    for (const listener of listeners) await receives(listener);

    // A fifth listener also fits on the second router and reuses the cached pipe.
    listeners.push(await listen(room, 'listener-5', [producerId]));
    assert.is(room.routers().length, 2);
    assert.is(room.routers()[1]!.pipedProducers, 1);
    await receives(listeners[4]!);

    const closed = once(room, 'producerclosed') as Promise<[ProducerClosed]>;
    room.closeProducer('speaker', producerId);
    const [event] = await closed;
    assert.is(event.producerId, producerId);
    assert.equal(event.consumers.map((c) => c.peerId).sort(), listeners.map((_, i) => `listener-${i + 1}`));
    await waitFor(() => room.routers().every((r) => r.consumers === 0 && r.pipedProducers === 0), 'consumers and pipes to close');
  } finally {
    room.close();
  }
});

test('sfu_blind: no audio level extension for clients or producers, no audio level events; RTP still flows', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'blind', encryption: 'sfu_blind', audioLevelIntervalMs: 200 });
  try {
    assert.not.ok(room.rtpCapabilities.headerExtensions?.some((e) => e.uri === AUDIO_LEVEL_EXTENSION));
    let levelEvents = 0;
    room.on('audiolevels', () => (levelEvents += 1));
    const producerId = await speak(room, 'speaker', 3333, 30);
    const listener = await listen(room, 'listener', [producerId]);
    await receives(listener);
    assert.not.ok(listener.consumers[0]!.rtpParameters.headerExtensions?.some((e) => e.uri === AUDIO_LEVEL_EXTENSION));
    await new Promise((r) => setTimeout(r, 500));
    assert.is(levelEvents, 0);
  } finally {
    room.close();
  }
});

test('screen profiles: slides keep resolution at a low frame rate, motion keeps the frame rate', () => {
  const slides = screenEncodingHint('slides');
  const motion = screenEncodingHint('motion');
  assert.is(slides.contentHint, 'detail');
  assert.is(motion.contentHint, 'motion');
  assert.ok(slides.encodings[0]!.maxFramerate < motion.encodings[0]!.maxFramerate);
  assert.is(slides.encodings[0]!.scaleResolutionDownBy, 1);
  assert.ok(Object.isFrozen(slides) && Object.isFrozen(slides.encodings[0]));
});

test('removePeer and close release the load on the pool', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'release', encryption: 'transport', consumerBudget: 2 });
  const producerId = await speak(room, 'speaker', 4444);
  await listen(room, 'l1', [producerId]);
  await listen(room, 'l2', [producerId]);
  await listen(room, 'l3', [producerId]);
  assert.is(room.routers().length, 2);
  assert.ok(pool.workers().every((w) => w.rooms.includes('release')));

  const closed = once(room, 'producerclosed') as Promise<[ProducerClosed]>;
  room.removePeer('speaker');
  assert.equal((await closed)[0].consumers.length, 3);
  for (const peerId of ['l1', 'l2', 'l3']) room.removePeer(peerId);
  assert.equal(room.peerIds(), []);
  // What remains until close(): the two routers and the idle pipe transports between them.
  await waitFor(() => pool.workers().every((w) => w.consumers === 0 && w.producers === 0), 'consumers and producers to go');

  room.close();
  room.close();
  assert.ok(room.closed);
  await rejects(() => room.createTransport('late', 'send'), (e: unknown) => e instanceof MediaError && e.code === 'room_closed');
  for (const w of pool.workers()) assert.equal([w.load, w.routers, w.rooms], [0, 0, []]);
});

test('worker death: the room rebuilds its main router, reports the peers it lost, and fresh transports forward again', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'phoenix', encryption: 'transport', consumerBudget: 3 });
  try {
    const producerId = await speak(room, 'speaker', 5555);
    const listeners: Listener[] = [];
    for (const n of [1, 2, 3, 4]) listeners.push(await listen(room, `listener-${n}`, [producerId]));
    const [main, second] = room.routers();
    const lost = once(room, 'medialost') as Promise<[MediaLost]>;
    const producerGone = once(room, 'producerclosed') as Promise<[ProducerClosed]>;

    process.kill(main!.pid, 'SIGKILL');
    const [event] = await lost;
    assert.is(event.pid, main!.pid);
    assert.ok(event.rebuilt);
    assert.equal([...event.peerIds].sort(), ['listener-1', 'listener-2', 'listener-3', 'speaker']);
    const [gone] = await producerGone;
    // The survivor on the other worker lost its piped consumer too, and is told so here.
    assert.equal(gone.consumers.map((c) => c.peerId).sort(), ['listener-1', 'listener-2', 'listener-3', 'listener-4']);

    const [newMain, kept] = room.routers();
    assert.is.not(newMain!.pid, main!.pid, 'the new main router is on a live worker');
    assert.is(kept!.routerId, second!.routerId, 'the router on the surviving worker stays');
    await rejects(
      () => room.consume('listener-1', listeners[0]!.transportId, producerId, room.rtpCapabilities),
      (e: unknown) => e instanceof MediaError,
    );

    // The speaker re-produces; a lost listener rejoins with a fresh transport; the survivor re-consumes via a new pipe.
    const again = await speak(room, 'speaker', 6666);
    const rejoined = await listen(room, 'listener-1', [again]);
    await receives(rejoined);
    const consumer = await room.consume('listener-4', listeners[3]!.transportId, again, room.rtpCapabilities);
    await room.resumeConsumer('listener-4', consumer.id);
    await nextMessage(listeners[3]!.sink, (m) => isRtp(m) && rtpSsrc(m) === consumerSsrc(consumer), 'RTP on the surviving router', 5000);
  } finally {
    room.close();
  }
});

test.run();

