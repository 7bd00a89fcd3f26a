import { once } from 'node:events';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaError } from '../../media/media-error.js';
import { RoomMedia, type MediaLost } from '../../media/room-media.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';

/**
 * A member told its media is gone (`medialost` → `media.reset`: "recreate transports and re-produce") can do so however
 * many times its worker dies: its transports on surviving routers (its send transport on the main router, when its
 * recv transport was on another worker) close with the lost ones, as the client drops them all on media.reset; kept,
 * they would count against TRANSPORTS_PER_DIRECTION.
 */
const logger = pino({ level: 'silent' });
let pool: MediaWorkerPool;

test.before(async () => {
  pool = await MediaWorkerPool.create({ size: 2, logger });
});
test.after(() => pool?.close());

/** Kills the worker of the member's off-main recv router; resolves with the room's report. */
async function killRecvWorker(room: RoomMedia): Promise<MediaLost> {
  const [main, other] = room.routers();
  assert.ok(other && other.pid !== main!.pid, 'the recv transport is on another worker than the main router');
  const lost = once(room, 'medialost') as Promise<[MediaLost]>;
  process.kill(other.pid, 'SIGKILL');
  return (await lost)[0];
}

/** What a client does on media.reset: a new send transport and a new recv transport; the error code if refused. */
async function recreate(room: RoomMedia, peerId: string): Promise<string[]> {
  const refused: string[] = [];
  for (const direction of ['send', 'recv'] as const) {
    try {
      await room.createTransport(peerId, direction);
    } catch (error) {
      if (!(error instanceof MediaError)) throw error;
      refused.push(`${direction}: ${error.code}`);
    }
  }
  return refused;
}

test('a member reset twice by worker deaths can recreate its transports each time (no transport_limit)', async () => {
  // Budget 1: the filler's recv transport fills the main router, so the member's recv transport goes to the other worker.
  const room = await RoomMedia.create({ pool, roomId: 'reset-twice', encryption: 'transport', consumerBudget: 1 });
  try {
    await room.createTransport('filler', 'recv');
    await room.createTransport('member', 'send');
    await room.createTransport('member', 'recv');

    const first = await killRecvWorker(room);
    assert.equal([...first.peerIds], ['member'], 'the member is told its media is gone');
    const afterFirst = await recreate(room, 'member');

    const second = await killRecvWorker(room);
    assert.equal([...second.peerIds], ['member'], 'the member is told its media is gone again');
    const afterSecond = await recreate(room, 'member');

    assert.equal({ afterFirst, afterSecond }, { afterFirst: [], afterSecond: [] });
  } finally {
    room.close();
  }
});

test.run();
