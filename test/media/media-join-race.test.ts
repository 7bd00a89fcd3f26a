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

/**
 * A person's old connection A sends room.join; while A's join waits (here: the target lookup), A is replaced by B
 * (the socket layer closes A at B's open), and B joins fully. A's join then lands at the room actor after B's and
 * resumes the member on connection A. B is the live connection on this node, so the member must end up connected on
 * B (not dropped, which would remove B when the grace ends).
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

test('a stale join of a replaced connection leaves the live connection dropped, then removed at grace end', async () => {
  const clock = new ManualClock(T0);
  const store = new PostgresActorStore(db.connection);
  const policy = meetingPolicy({ floorControl: 'open', reconnectGraceSeconds: 5 });
  const { host, rooms } = standInRooms({ store, clock, pool, target: { kind: 'space', policy, violations: [] }, timerPollMs: 1_000 });
  let releaseA: () => void = () => {};
  const gateA = new Promise<void>((r) => (releaseA = r));
  const scope = 'race';
  const a = standInConnection('conn-a', 'act_person', scope);
  const b = standInConnection('conn-b', 'act_person', scope);
  // A's join is slow in its target lookup (an installation read).
  const realRequest = rooms.request.bind(rooms);
  const joinA = (async () => {
    await gateA; // stands for A's target() lookup still pending
    return realRequest(asConnection(a), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never);
  })();
  // B opens: the socket layer closes A (replaced); A never joined here, so disconnected(A) does nothing.
  a.closed = true;
  rooms.disconnected(asConnection(a));
  const bJoin = await realRequest(asConnection(b), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never);
  assert.is((bJoin.self as { connection?: string } | null) !== null, true);
  releaseA();
  const aResult = await joinA.then(() => 'ok', (e: unknown) => (e as Error).message);
  const ctx = (await host.send(MEDIA_ROOM_KIND, mediaRoomKey(ENV, scope), { type: 'publish.check', memberId: 'act_person', source: 'microphone' })).snapshot.context as MediaRoomContext;
  const member = ctx.members.find((m) => m.memberId === 'act_person');
  console.log('A join:', aResult, '| room member:', JSON.stringify({ presence: member?.presence, connectionId: member?.connectionId }), '| B closed:', b.closed);
  // The grace (5 s) ends.
  clock.advance(6_000);
  await new Promise((r) => setTimeout(r, 1_500));
  const after = (await host.readCommitted(MEDIA_ROOM_KIND, mediaRoomKey(ENV, scope)))?.state as { context: MediaRoomContext } | undefined;
  console.log('after grace: members', JSON.stringify(after?.context.members.map((m) => m.memberId)), '| B closed with', JSON.stringify(b.closedWith), '| B sent', JSON.stringify(b.sent.filter((m) => (m as { type: string }).type === 'session.ended')));
  await rooms.close();
  await host.drain();
  assert.is(member?.presence, 'connected', 'B is open and joined on this node, but the room holds the member as dropped (A\'s stale join + drop)');
});

test.run();
