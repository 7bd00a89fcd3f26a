import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

/**
 * A producer whose worker dies while its right to publish is checked the second time (after it was made) is lost
 * media, not a right that ended: `produce` is answered `media_unavailable`, as the `media.reset` the member gets says,
 * never `not_speaker`, which would have the client stop publishing.
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

const MICROPHONE_RTP = { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 33_333 }] };
const PUBLISHER = ['media:connect', 'media:join-space', 'media:request-speak', 'media:publish'];

test('a worker lost during the second publish check: produce is answered media_unavailable, with media.reset', async () => {
  const clock = new ManualClock(T0);
  const target = { kind: 'space', policy: meetingPolicy({ floorControl: 'open' }), violations: [] } as const;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let checks = 0;
  let recheckHeld = false;
  const { host, rooms } = standInRooms({
    store: new PostgresActorStore(db.connection),
    clock,
    pool,
    target,
    timerPollMs: 3_600_000,
    beforeSend: async (event) => {
      if (event.type !== 'publish.check' || event.memberId !== 'act_speaker' || ++checks !== 2) return;
      recheckHeld = true;
      await opened;
    },
  });
  const speaker = standInConnection('conn-s', 'act_speaker', 'recheck-worker-lost', { scopes: PUBLISHER });
  try {
    await rooms.request(asConnection(speaker), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never);
    const { transportId } = (await rooms.request(asConnection(speaker), { type: 'transport.create', id: 't', direction: 'send' } as never)) as { transportId: string };
    const producing = rooms
      .request(asConnection(speaker), { type: 'produce', id: 'p', transportId, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP } as never)
      .then(() => 'ok', (error: unknown) => (error as { code?: string }).code ?? String(error));
    await waitFor(() => recheckHeld, 'the producer to be made and checked again');

    process.kill(pool.workers()[0]!.pid, 'SIGKILL');
    await waitFor(() => speaker.sent.some((m) => (m as { type?: string }).type === 'media.reset'), 'media.reset for the lost worker', 15_000);
    open();
    assert.is(await producing, 'media_unavailable');
  } finally {
    open();
    await rooms.close();
    await host.drain();
  }
});

test.run();
