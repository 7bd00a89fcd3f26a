import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKey } from '../../actors/media.actors.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import { ActorRetirement } from '../../storage/postgres/actor-retirement.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { CommitEntry } from '../../storage/actor-store.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { interceptCommits } from '../support/host.js';
import { ENV, meetingPolicy } from '../support/media-room.js';

/**
 * A room empty for the retention period is retired and opens afresh on the next join. The control plane opens a room
 * (`room.open`) only when it has no LiveRoom for the key, so a LiveRoom nobody is in must not outlive a failed join:
 * kept, it would outlive the room's retirement, and every later join on this node would reach a never-written actor.
 * Real host, Postgres, retirement and mediasoup worker; the connections are stand-ins (no socket is involved).
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

const hasJoin = (entries: readonly CommitEntry[], key: string) =>
  entries.some((e) => e.kind === MEDIA_ROOM_KIND && e.key === key && e.journal.some((r) => (r.event as { type?: string }).type === 'member.join'));

async function setUp(scope: string, beforeJoinCommit: () => Promise<void>) {
  const clock = new ManualClock(Date.now());
  const key = mediaRoomKey(ENV, scope);
  let armed = false;
  const store = interceptCommits(new PostgresActorStore(db.connection), async (entries, next) => {
    if (armed && hasJoin(entries, key)) {
      armed = false;
      await beforeJoinCommit();
    }
    return next(entries);
  });
  const { host, rooms } = standInRooms({ store, clock, pool, target: { kind: 'space', policy: meetingPolicy(), violations: [] } });
  const join = (conn: ReturnType<typeof asConnection>) =>
    rooms!.request(conn, { type: 'room.join', id: 'j', rtpCapabilities: {} } as never).then(
      () => 'ok',
      (e: unknown) => (e as { code?: string }).code ?? (e as Error).message,
    );
  // Someone was in the room and left: the node's LiveRoom went with them, the room is empty (ended) from now.
  const first = asConnection(standInConnection('conn-a', 'act_a', scope));
  assert.is(await join(first), 'ok');
  await rooms.request(first, { type: 'room.leave', id: 'l' } as never);
  return { clock, host, rooms, join, arm: () => (armed = true) };
}

test('a join in flight while its empty room is retired fails; the next joins open the room afresh', async () => {
  const retirement = new ActorRetirement(db.connection.db);
  const clock = { now: () => Date.now() };
  const { host, rooms, join, arm } = await setUp('raced', async () => {
    // The retirement pass commits between the join's `room.open` (a no-op on the open empty room) and its commit.
    assert.is(await retirement.pass(clock.now() + 1), 1);
  });
  arm();
  const inFlight = await join(asConnection(standInConnection('conn-b', 'act_b', 'raced')));
  const retried = await join(asConnection(standInConnection('conn-b2', 'act_b', 'raced')));
  const later = await join(asConnection(standInConnection('conn-c', 'act_c', 'raced')));
  await rooms.close();
  await host.drain();
  // Fenced by the retirement: the documented retryable refusal.
  assert.is(inFlight, 'runtime_coordination_unavailable');
  assert.equal({ retried, later }, { retried: 'ok', later: 'ok' }, 'the node kept the LiveRoom of a retired room, so no join opens it again');
});

test('a LiveRoom left empty by a failed join goes with it: a join after the room was retired opens it afresh', async () => {
  const retirement = new ActorRetirement(db.connection.db);
  const { host, rooms, join, arm } = await setUp('failed', async () => {
    throw new Error('connection terminated unexpectedly');
  });
  arm();
  const failed = await join(asConnection(standInConnection('conn-b', 'act_b', 'failed')));
  assert.ok(failed !== 'ok', 'the first join failed (a transient storage error)');
  // Retention later: the room, empty since the leave, is retired.
  assert.is(await retirement.pass(Date.now() + 1), 1);
  const next = await join(asConnection(standInConnection('conn-c', 'act_c', 'failed')));
  await rooms.close();
  await host.drain();
  assert.is(next, 'ok', 'a join after the room was retired');
});

test.run();
