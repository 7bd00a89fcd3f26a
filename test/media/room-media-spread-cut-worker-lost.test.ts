import { once } from 'node:events';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaError } from '../../media/media-error.js';
import { RoomMedia, type MediaLost } from '../../media/room-media.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';

/**
 * A recv transport spreading to a router on another worker, cut by that worker's death while the router is made: the
 * room had nothing there yet, but the peer was refused `media_unavailable` and is named in the loss's report
 * (`medialost`, hence `media.reset`), or it would never learn its media can be made again.
 */
const logger = pino({ level: 'silent' });
const MICROPHONE_RTP = { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 55_555 }] };
let pool: MediaWorkerPool;

test.before(async () => {
  pool = await MediaWorkerPool.create({ size: 2, logger });
});
test.after(() => pool?.close());

test('a router being made for a recv transport, lost with its worker: media_unavailable, and the peer is in medialost', async () => {
  // Budget 1: the filler's recv transport fills the main router, so the member's goes to a new router on the other worker.
  const room = await RoomMedia.create({ pool, roomId: 'spread-cut', encryption: 'transport', consumerBudget: 1 });
  try {
    await room.createTransport('filler', 'recv');
    const mainPid = room.routers()[0]!.pid;
    const other = pool.workers().find((w) => w.pid !== mainPid)!.pid;
    const lost = once(room, 'medialost') as Promise<[MediaLost]>;

    process.kill(other, 'SIGSTOP');
    const created = room.createTransport('member', 'recv').then(
      () => 'ok',
      (error: unknown) => (error instanceof MediaError ? error.code : `unexpected ${String(error)}`),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(other, 'SIGKILL');

    const answer = await created;
    let timer: NodeJS.Timeout | undefined;
    const report = await Promise.race([lost.then(([event]) => [...event.peerIds]), new Promise<string>((resolve) => (timer = setTimeout(() => resolve('no medialost'), 10_000)))]);
    clearTimeout(timer);
    assert.equal({ answer, report }, { answer: 'media_unavailable', report: ['member'] });
    assert.ok(room.hasTransports('filler'), 'a peer on the surviving main router keeps its media');
    await room.createTransport('member', 'recv');
  } finally {
    room.close();
  }
});

test('a producer being piped to a listener\'s router lost with its worker: consume is media_unavailable, not a missing transport', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'pipe-cut', encryption: 'transport', consumerBudget: 1 });
  try {
    await room.createTransport('filler', 'recv');
    const send = await room.createTransport('speaker', 'send');
    const { id: producerId } = await room.produce('speaker', send.id, { kind: 'audio', rtpParameters: MICROPHONE_RTP, appData: { source: 'microphone' } });
    const recv = await room.createTransport('listener', 'recv');
    const [main, spread] = room.routers();
    assert.ok(spread && spread.pid !== main!.pid, 'the listener\'s recv transport is on the other worker');
    const lost = once(room, 'medialost') as Promise<[MediaLost]>;

    process.kill(spread.pid, 'SIGSTOP');
    const consumed = room.consume('listener', recv.id, producerId, room.rtpCapabilities).then(
      () => 'ok',
      (error: unknown) => (error instanceof MediaError ? error.code : `unexpected ${String(error)}`),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(spread.pid, 'SIGKILL');

    assert.is(await consumed, 'media_unavailable');
    assert.equal([...(await lost)[0].peerIds], ['listener'], 'the listener is told its media is gone');
  } finally {
    room.close();
  }
});

test.run();
