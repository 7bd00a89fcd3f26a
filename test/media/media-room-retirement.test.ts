import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKind } from '../../actors/media.actors.js';
import type { MediaRoomContext } from '../../machines/media-room/media-room.state.js';
import { ActorRetirement } from '../../storage/postgres/actor-retirement.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';
import { ENV, meetingPolicy, PureRoom } from '../support/media-room.js';

/**
 * A media room's end is its emptiness (`emptySince`): set when the last member goes, kept while it stays empty, cleared
 * by a join. A room empty for the retention period is retired (snapshot and journal), and the next open starts it
 * afresh. Pure machine first, then the product's room kind on a real host and Postgres.
 */
const DAY = 24 * 3600_000;
let db: TestDatabase;
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ db, store } = opened));

test('emptySince: set at open and when the last member goes (leave or grace end), kept while empty, cleared by a join', () => {
  const room = new PureRoom(meetingPolicy({ reconnectGraceSeconds: 10 }));
  const opened = room.now;
  assert.is(room.context.emptySince, opened);
  room.advance(1_000).ok({ type: 'room.hosting', ttlMs: 60_000, connectionIds: [] });
  assert.is(room.context.emptySince, opened, 'a change while empty keeps it');
  room.advance(1_000).join('a');
  room.join('b');
  assert.is(room.context.emptySince, null);
  room.advance(1_000).ok({ type: 'member.leave', memberId: 'a' });
  assert.is(room.context.emptySince, null, 'someone is still in');
  room.advance(1_000).ok({ type: 'member.drop', memberId: 'b', connectionId: 'conn-b' });
  assert.is(room.context.emptySince, null, 'a dropped member inside its grace is still a member');
  const graceUntil = room.context.members[0]!.graceUntil!;
  room.advance(10_000).send({ type: 'timer.due', name: 'grace:b', dueAt: graceUntil });
  assert.equal([room.context.members.length, room.context.emptySince], [0, room.now]);
});

test('a room empty past the retention is retired; the next open and join start it afresh', async () => {
  const clock = new ManualClock(Date.now() - 40 * DAY);
  const host = hostFor(store, clock, [mediaRoomKind(() => {})]);
  host.start();
  const key = `${ENV}.call-42`;
  const send = async (event: Record<string, unknown> & { type: string }) => (await host.send(MEDIA_ROOM_KIND, key, event)).snapshot.context as MediaRoomContext;
  const join = { type: 'member.join', memberId: 'a', displayName: 'A', guest: false, moderator: false, connectionId: 'conn-a' };
  await send({ type: 'room.open', policy: meetingPolicy() });
  await send(join);
  // Less than the hosting deadline: the member leaves, rather than being dropped and timed out.
  clock.advance(5_000);
  const left = await send({ type: 'member.leave', memberId: 'a' });
  assert.is(left.emptySince, clock.now());
  const stored = await db.connection.db.selectFrom('actor_snapshots').select('ended_at').where('kind', '=', MEDIA_ROOM_KIND).where('key', '=', key).executeTakeFirst();
  assert.equal(stored?.ended_at, new Date(clock.now()));
  await host.drain();

  const retirement = new ActorRetirement(db.connection.db);
  assert.is(await retirement.pass(clock.now()), 0, 'not before its end');
  assert.is(await retirement.pass(clock.now() + 1), 1);
  assert.is(await store.load(MEDIA_ROOM_KIND, key), undefined);

  const again = hostFor(store, clock, [mediaRoomKind(() => {})]);
  again.start();
  const reopened = (await again.send(MEDIA_ROOM_KIND, key, { type: 'room.open', policy: meetingPolicy({ maxSpeakerSeats: 3 }) })).snapshot.context as MediaRoomContext;
  assert.equal([reopened.policy?.maxSpeakerSeats, reopened.members.length], [3, 0]);
  const rejoined = (await again.send(MEDIA_ROOM_KIND, key, join)).snapshot.context as MediaRoomContext;
  assert.equal([rejoined.members.map((m) => m.memberId), rejoined.emptySince], [['a'], null]);
  await again.drain();
});

test.run();
