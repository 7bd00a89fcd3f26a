import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RoomMedia } from '../../media/room-media.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { withFailingWorkerPool, type FailingWorkerSpawn } from '../support/failing-worker-spawn.js';
import { asConnection, standInConnection, standInRooms } from '../support/media-stand-in.js';
import { meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

/**
 * A room whose worker died while no live worker could take its main router (the replacement did not start yet) answers
 * `media_unavailable` meanwhile, and is served again once a worker is back: it retries the rebuild (media/README.md,
 * Recovery), and members with no transport are told `media.reset` again to make their media.
 */
let db: TestDatabase;
let spawn: FailingWorkerSpawn;
let pool: MediaWorkerPool;
withFailingWorkerPool(test, (started) => ({ db, spawn, pool } = started));

const code = (error: unknown): string => (error as { code?: string }).code ?? String(error);

test('a main router that could not be rebuilt is rebuilt once a worker is back, and its members are told to make media again', async () => {
  const clock = new ManualClock(T0);
  const target = { kind: 'space', policy: meetingPolicy({ floorControl: 'open' }), violations: [] } as const;
  const { host, rooms } = standInRooms({ store: new PostgresActorStore(db.connection), clock, pool, target, timerPollMs: 3_600_000 });
  const scope = 'rebuild-retry';
  const member = standInConnection('conn-a', 'act_a', scope);
  const resets = (): number => member.sent.filter((m) => (m as { type?: string }).type === 'media.reset').length;
  const create = (id: string) => rooms.request(asConnection(member), { type: 'transport.create', id, direction: 'send' } as never);
  try {
    await rooms.request(asConnection(member), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never);
    await create('t1');

    await spawn.refuse();
    const [worker] = pool.workers();
    process.kill(worker!.pid, 'SIGKILL');
    await waitFor(() => resets() === 1, 'media.reset for the lost transport');
    assert.is(pool.size, 0, 'the replacement did not start');
    assert.is(await create('t2').then(() => 'ok', code), 'media_unavailable');

    await spawn.allow();
    let attempt = 0;
    await waitFor(() => create(`t${3 + attempt++}`).then(() => true, () => false), 'the room to serve its member again', 20_000);
    assert.is(resets(), 2, 'a second media.reset came when the room was served again');
  } finally {
    await rooms.close();
    await host.drain();
  }
});

test('a room closed (emptied) while it waits for a worker stops retrying: nothing is rebuilt for it', async () => {
  const room = await RoomMedia.create({ pool, roomId: 'closed-while-waiting', encryption: 'transport' });
  const lost = new Promise<boolean>((resolve) => room.once('medialost', (event) => resolve(event.rebuilt)));
  await spawn.refuse();
  process.kill(pool.workers()[0]!.pid, 'SIGKILL');
  assert.is(await lost, false);
  room.close();
  await spawn.allow();
  await waitFor(() => pool.size === 1, 'the pool to start its replacement again', 15_000);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  assert.equal(pool.workers()[0]!.rooms, [], 'no router was made for the closed room');
});

test.run();
