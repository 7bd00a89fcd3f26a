import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKey } from '../../actors/media.actors.js';
import type { MediaRoomContext } from '../../machines/media-room/media-room.state.js';
import type { RoomTarget } from '../../media/control/media-rooms.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import type { ActorStore } from '../../storage/actor-store.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { directCallPolicy, ENV, meetingPolicy, T0 } from '../support/media-room.js';

/**
 * A member whose grace ends and who joins again at that moment. The room removes it (grace_expired, naming the
 * connection it lost), and the control plane learns it only through `changedByDeadline`, which reads the room's
 * committed state first. A join on the member's new connection that the room admits meanwhile (a fresh member) is
 * live on this node before that read answers. The removal names the old connection: it must not close the new one,
 * take its media, or give back the call place the new join holds.
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

/** The real store, whose `load` (what `readCommitted` reads) waits while `gate.hold` is set. */
function gatedStore(inner: ActorStore) {
  const gate = { hold: false, waiting: [] as (() => void)[], reached: 0 };
  const store: ActorStore = {
    load: async (kind, key) => {
      if (gate.hold) {
        gate.reached += 1;
        await new Promise<void>((resolve) => gate.waiting.push(resolve));
      }
      return inner.load(kind, key);
    },
    readJournal: (kind, key, query) => inner.readJournal(kind, key, query),
    dueActors: (before, limit, after) => inner.dueActors(before, limit, after),
    replaceTimers: (kind, key, epoch, snapshotVersion, timers, endedAt) => inner.replaceTimers(kind, key, epoch, snapshotVersion, timers, endedAt),
    ping: () => inner.ping(),
    landed: (entries) => inner.landed(entries),
    commit: (entries) => inner.commit(entries),
  };
  const release = (): void => {
    gate.hold = false;
    for (const resolve of gate.waiting.splice(0)) resolve();
  };
  return { store, gate, release };
}

const until = async (condition: () => boolean, what: string): Promise<void> => {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
};

async function world(target: RoomTarget, callsPerPerson?: number) {
  const clock = new ManualClock(T0);
  const { store, gate, release } = gatedStore(new PostgresActorStore(db.connection));
  const { host, rooms } = standInRooms({ store, clock, pool, target, timerPollMs: 3_600_000, ...(callsPerPerson === undefined ? {} : { callsPerPerson }) });
  return { clock, host, rooms, gate, release };
}

const join = (id: string) => ({ type: 'room.join', id, rtpCapabilities: {} }) as never;

test('a member joining again as its grace ends keeps its new connection: the removal of the old one does not close it', async () => {
  const { clock, host, rooms, gate, release } = await world({ kind: 'space', policy: meetingPolicy({ floorControl: 'open', reconnectGraceSeconds: 5 }), violations: [] });
  const scope = 'grace-rejoin';
  const key = mediaRoomKey(ENV, scope);
  const mod = standInConnection('conn-mod', 'act_mod', scope);
  const first = standInConnection('conn-x1', 'act_x', scope);
  await rooms.request(asConnection(mod), join('j1'));
  await rooms.request(asConnection(first), join('j2'));
  // The socket of x's first connection closes: dropped, its grace runs.
  first.closed = true;
  rooms.disconnected(asConnection(first));
  await until(() => (host.peekCommitted(MEDIA_ROOM_KIND, key)?.context as MediaRoomContext | undefined)?.members.some((m) => m.memberId === 'act_x' && m.presence === 'dropped') === true, 'the drop');

  // The grace ends; the control plane's read of the room after it is slow.
  gate.hold = true;
  clock.advance(5_000);
  await until(() => gate.reached > 0, 'the read after the deadline');
  // x's new connection joins now: the room no longer holds x, so it is a fresh member.
  const second = standInConnection('conn-x2', 'act_x', scope);
  const joined = await rooms.request(asConnection(second), join('j3'));
  assert.is(joined.resumed, false);
  release();
  await new Promise((r) => setTimeout(r, 300));

  const transport = await rooms.request(asConnection(second), { type: 'transport.create', id: 't', direction: 'recv' } as never).then(
    () => 'ok',
    (e: unknown) => (e as { code?: string }).code ?? String(e),
  );
  const context = (await host.readCommitted(MEDIA_ROOM_KIND, key))?.state as { context: MediaRoomContext } | undefined;
  const x = context?.context.members.find((m) => m.memberId === 'act_x');
  await rooms.close();
  await host.drain();
  assert.equal(
    {
      secondClosed: second.closedWith,
      secondTold: second.sent.filter((m) => (m as { type: string }).type === 'session.ended'),
      roomHolds: x && { presence: x.presence, connectionId: x.connectionId },
      transportCreate: transport,
    },
    { secondClosed: undefined, secondTold: [], roomHolds: { presence: 'connected', connectionId: 'conn-x2' }, transportCreate: 'ok' },
  );
});

test('a direct call joined again as its grace ends keeps its call place: a person cannot then be in more calls than the limit', async () => {
  const { clock, host, rooms, gate, release } = await world({ kind: 'call', policy: directCallPolicy({ guestPolicy: 'account_required', reconnectGraceSeconds: 5 }), violations: [] }, 1);
  const scope = 'call:grace-rejoin';
  const key = mediaRoomKey(ENV, scope);
  const callee = standInConnection('conn-callee', 'act_callee', scope);
  const first = standInConnection('conn-c1', 'act_caller', scope);
  for (const c of [callee, first]) c.user.grant = { ...(c.user.grant as object), scopes: ['media:connect', 'media:direct-call'] } as never;
  await rooms.request(asConnection(callee), join('j1'));
  await rooms.request(asConnection(first), join('j2'));
  first.closed = true;
  rooms.disconnected(asConnection(first));
  await until(() => (host.peekCommitted(MEDIA_ROOM_KIND, key)?.context as MediaRoomContext | undefined)?.members.some((m) => m.memberId === 'act_caller' && m.presence === 'dropped') === true, 'the drop');

  gate.hold = true;
  clock.advance(5_000);
  await until(() => gate.reached > 0, 'the read after the deadline');
  const second = standInConnection('conn-c2', 'act_caller', scope);
  second.user.grant = { ...(second.user.grant as object), scopes: ['media:connect', 'media:direct-call'] } as never;
  await rooms.request(asConnection(second), join('j3'));
  release();
  await new Promise((r) => setTimeout(r, 300));

  // The caller is in this call (connected); with one call allowed per person, another call is refused.
  const other = standInConnection('conn-c3', 'act_caller', 'call:another');
  other.user.grant = { ...(other.user.grant as object), scopes: ['media:connect', 'media:direct-call'] } as never;
  const outcome = await rooms.request(asConnection(other), join('j4')).then(
    () => 'joined',
    (e: unknown) => (e as { code?: string }).code ?? String(e),
  );
  await rooms.close();
  await host.drain();
  assert.is(outcome, 'direct_call_limit');
});

test.run();
