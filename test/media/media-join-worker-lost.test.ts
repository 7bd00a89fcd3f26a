import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKey } from '../../actors/media.actors.js';
import type { MediaRoomContext } from '../../machines/media-room/media-room.state.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { ENV, meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

/**
 * While a dead worker's replacement starts, the room's main router is gone and its calls fail `media_unavailable`
 * (media/README.md, Recovery). A `room.join` in that window was admitted by the room actor (a member, on an open floor
 * seated) and recorded as this node's connection, and only then answered `media_unavailable` while building its answer:
 * the client was told it is not in the room, and the room held it, connected and seated, with its requests served.
 * A join is refused before the room admits it, or answered ok.
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

test('a join while the room\'s worker is replaced: refused media_unavailable only if the room did not admit it', async () => {
  const clock = new ManualClock(T0);
  const target = { kind: 'space', policy: meetingPolicy({ floorControl: 'open', reconnectGraceSeconds: 5 }), violations: [] } as const;
  const { host, rooms } = standInRooms({ store: new PostgresActorStore(db.connection), clock, pool, target, timerPollMs: 3_600_000 });
  const scope = 'worker-lost-join';
  const key = mediaRoomKey(ENV, scope);
  const first = standInConnection('conn-a', 'act_a', scope);
  await rooms.request(asConnection(first), { type: 'room.join', id: 'j1', rtpCapabilities: {} } as never);

  // The room's only worker dies; the join comes before its replacement is up.
  const worker = pool.leastLoaded().worker;
  const died = new Promise<void>((resolve) => worker.once('died', () => resolve()));
  process.kill(worker.pid, 'SIGKILL');
  await died;
  const late = standInConnection('conn-b', 'act_b', scope);
  const answer = await rooms.request(asConnection(late), { type: 'room.join', id: 'j2', rtpCapabilities: {} } as never).then(
    () => 'ok',
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );
  // The room is rebuilt on the replacement: the member already in it is served again.
  await waitFor(
    () => rooms!.request(asConnection(first), { type: 'transport.create', id: 'p', direction: 'send' } as never).then(() => true, () => false),
    'the room rebuilt on the replacement worker',
  );

  const context = (host.peekCommitted(MEDIA_ROOM_KIND, key)?.context ?? ((await host.readCommitted(MEDIA_ROOM_KIND, key))?.state as { context: MediaRoomContext }).context) as MediaRoomContext;
  const inRoom = context.members.some((m) => m.memberId === 'act_b');
  const served = await rooms.request(asConnection(late), { type: 'transport.create', id: 't', direction: 'recv' } as never).then(
    () => 'served',
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );
  await rooms.close();
  await host.drain();
  if (answer === 'ok') assert.equal({ answer, inRoom, served }, { answer: 'ok', inRoom: true, served: 'served' });
  else assert.equal({ answer, inRoom, served }, { answer: 'media_unavailable', inRoom: false, served: 'not_joined' }, 'refused, yet in the room');
});

test.run();
