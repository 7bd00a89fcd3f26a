import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MediaRequestError } from '../../media/control/media-control.socket.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { withFailingWorkerPool, type FailingWorkerSpawn } from '../support/failing-worker-spawn.js';
import { captureLogs } from '../support/log-capture.js';
import { asConnection, standInConnection, standInRooms } from '../support/media-stand-in.js';
import { meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

/**
 * A `room.join` whose room cannot be placed because a worker was lost (it died while the room's router was made, or no
 * worker is up while its replacement starts again) is refused `media_unavailable` and logged as a warning: the death
 * is the pool's one error line, not one more for every join while it lasts.
 */
let db: TestDatabase;
let spawn: FailingWorkerSpawn;
let pool: MediaWorkerPool;
withFailingWorkerPool(test, (started) => ({ db, spawn, pool } = started));

async function joinLogged(scope: string, during: (join: Promise<string>) => Promise<void>): Promise<{ answer: string; levels: number[] }> {
  const { logger, lines } = captureLogs('debug');
  const target = { kind: 'space', policy: meetingPolicy({ floorControl: 'open' }), violations: [] } as const;
  const { host, rooms } = standInRooms({ store: new PostgresActorStore(db.connection), clock: new ManualClock(T0), pool, target, timerPollMs: 3_600_000, logger });
  try {
    const member = standInConnection(`conn-${scope}`, 'act_a', scope);
    const join = rooms.request(asConnection(member), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never).then(
      () => 'ok',
      (error: unknown) => (error instanceof MediaRequestError ? error.code : `unexpected ${String(error)}`),
    );
    await during(join);
    const answer = await join;
    return { answer, levels: lines.filter((l) => l.msg === 'media room could not be placed on a worker').map((l) => l.level) };
  } finally {
    await rooms.close();
    await host.drain();
  }
}

const WARN = 40;

/** The pool's worker, once one is up (a test before may have left a replacement starting). */
async function liveWorkerPid(): Promise<number> {
  await waitFor(() => pool.size === 1, 'a live worker', 20_000);
  return pool.workers()[0]!.pid;
}

test('the worker dies while the joined room\'s router is made: media_unavailable, logged as a warning', async () => {
  const outcome = await joinLogged('dies-while-placed', async () => {
    const pid = await liveWorkerPid();
    process.kill(pid, 'SIGSTOP');
    // The join asks the room actor (Postgres) first; then its router waits on the stopped worker.
    await new Promise((resolve) => setTimeout(resolve, 700));
    process.kill(pid, 'SIGKILL');
  });
  assert.equal(outcome, { answer: 'media_unavailable', levels: [WARN] });
});

test('no worker up while the replacement starts again: media_unavailable, logged as a warning', async () => {
  const pid = await liveWorkerPid();
  await spawn.refuse();
  try {
    process.kill(pid, 'SIGKILL');
    await waitFor(() => pool.size === 0, 'the worker gone, its replacement refused', 15_000);
    const outcome = await joinLogged('no-worker', async () => undefined);
    assert.equal(outcome, { answer: 'media_unavailable', levels: [WARN] });
  } finally {
    await spawn.allow();
  }
});

test.run();
