import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaError } from '../../media/media-error.js';
import { RoomMedia } from '../../media/room-media.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import { waitFor } from '../support/wait.js';

/**
 * A listener whose recv transport is on another router than the room's main one consumes a producer that closes while
 * it is piped there (the speaker stops, loses its seat or leaves right as `producer.added` reached the listener): the
 * consume is refused `producer_not_found`, as it is on the main router, not with mediasoup's NotFoundError (which the
 * control plane can only answer `internal_error`), and the pipe leaves nothing behind.
 */
const logger = pino({ level: 'silent' });
let pool: MediaWorkerPool;

test.before(async () => {
  pool = await MediaWorkerPool.create({ size: 2, logger });
});
test.after(() => pool?.close());

const OPUS = { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48000, channels: 2 }], encodings: [{ ssrc: 4242 }] };

test('a producer closed while it is piped to a listener\'s router: the consume is refused producer_not_found, and no pipe stays', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'consume-race', encryption: 'transport', consumerBudget: 1 });
  try {
    const send = await room.createPlainTransport('speaker', 'send');
    // The first listener's recv transport fills the main router's budget; the second one goes to another router.
    await room.createPlainTransport('listener-1', 'recv');
    const recv = await room.createPlainTransport('listener-2', 'recv');
    assert.is(room.routers().length, 2);
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { id } = await room.produce('speaker', send.id, { kind: 'audio', rtpParameters: { ...OPUS, mid: String(i), encodings: [{ ssrc: 4242 + i }] }, appData: { source: 'microphone' } });
      const consuming = room.consume('listener-2', recv.id, id, room.rtpCapabilities);
      // Closed while the pipe to the listener's router is being made.
      room.closeProducer('speaker', id);
      outcomes.push(
        await consuming.then(
          () => 'consumed',
          (error: unknown) => (error instanceof MediaError ? error.code : `${(error as Error).name}: ${(error as Error).message}`),
        ),
      );
    }
    await waitFor(() => room.routers().every((r) => r.consumers === 0 && r.pipedProducers === 0), 'pipes and consumers to close');
    assert.equal(outcomes, Array(5).fill('producer_not_found'));
  } finally {
    room.close();
  }
});

test.run();
