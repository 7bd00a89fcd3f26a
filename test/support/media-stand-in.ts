import pino, { type Logger } from 'pino';
import type { Test } from 'uvu';
import type { ActorHost } from '../../actors/actor-host.js';
import type { Clock } from '../../actors/clock.js';
import { mediaRoomKey, mediaRoomKind } from '../../actors/media.actors.js';
import type { MediaConnection } from '../../media/control/media-control.socket.js';
import { MediaRooms, type MediaRoomsDeps, type RoomTarget } from '../../media/control/media-rooms.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import type { ActorStore } from '../../storage/actor-store.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { hostFor } from './host.js';
import { ENV } from './media-room.js';

/**
 * A stand-in for one Media control connection of `memberId` in `scope` (Environment ENV), for tests of the room logic
 * below the socket (MediaRooms with a real host, Postgres and mediasoup worker): it records what it was sent and how
 * it was closed. The socket layer has its own tests.
 */
export function standInConnection(id: string, memberId: string, scope: string, as: { scopes?: readonly string[]; environmentRoles?: readonly string[] } = {}) {
  const sent: unknown[] = [];
  return {
    id,
    codec: 'json',
    logger: pino({ level: 'silent' }),
    closed: false,
    closedWith: undefined as undefined | [number | undefined, string | undefined],
    user: {
      grant: { environmentId: ENV, scopes: as.scopes ?? ['media:connect', 'media:join-space'], environmentRoles: as.environmentRoles ?? [], actorId: memberId } as never,
      grantToken: 'g',
      memberId,
      roomKey: mediaRoomKey(ENV, scope),
      scope,
    },
    newRequestId: () => 'req',
    send: (m: unknown) => (sent.push(m), true),
    close(code?: number, reason?: string) {
      this.closed = true;
      this.closedWith = [code, reason];
    },
    bufferedBytes: () => 0,
    sent,
  };
}

export const asConnection = (standIn: ReturnType<typeof standInConnection>): MediaConnection => standIn as unknown as MediaConnection;

/** Gives a suite a database and a one-worker mediasoup pool before its first test, and closes both after its last. */
export function withDatabaseAndWorker(suite: Test, opened: (setup: { db: TestDatabase; pool: MediaWorkerPool }) => void): void {
  let db: TestDatabase | undefined;
  let pool: MediaWorkerPool | undefined;
  suite.before(async () => {
    db = await createTestDatabase();
    pool = await MediaWorkerPool.create({ size: 1, logger: pino({ level: 'silent' }) });
    opened({ db, pool });
  });
  suite.after(async () => {
    pool?.close();
    await db?.drop();
  });
}

/**
 * MediaRooms of one node, as the control socket drives them, on a real host (`store`, `clock`, started here; the caller
 * drains it) and worker pool: every room is `target`, every publisher is allowed (unless `authorizePublisher` says
 * otherwise, or holds its answer), and this node vouches for its connections for an hour (no hosting lapse inside a
 * test). `beforeSend` runs before each request MediaRooms sends the room actor, which waits for it: a test holds one
 * there, as a slow store would, to act inside the window it leaves.
 */
export function standInRooms(options: {
  readonly store: ActorStore;
  readonly clock: Clock;
  readonly pool: MediaWorkerPool;
  readonly target: RoomTarget;
  readonly timerPollMs?: number;
  readonly callsPerPerson?: number;
  readonly authorizePublisher?: MediaRoomsDeps['authorizePublisher'];
  readonly beforeSend?: (event: { readonly type: string; readonly memberId?: string }) => Promise<void> | void;
  /** Where MediaRooms logs; silent unless given. */
  readonly logger?: Logger;
}): { host: ActorHost; rooms: MediaRooms } {
  const { store, clock, pool, target, timerPollMs, callsPerPerson, beforeSend } = options;
  let rooms: MediaRooms | undefined;
  const host = hostFor(store, clock, [mediaRoomKind((change) => rooms?.changedByDeadline(change))], timerPollMs === undefined ? {} : { timerPollMs });
  host.start();
  const send: ActorHost['send'] = async (kind, key, event) => {
    await beforeSend?.(event as { type: string; memberId?: string });
    return host.send(kind, key, event);
  };
  // The host itself for everything else (its methods bound to it: they use its private state).
  const seen = beforeSend
    ? new Proxy(host, {
        get: (target, name) => {
          if (name === 'send') return send;
          const value: unknown = Reflect.get(target, name, target);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      })
    : host;
  rooms = new MediaRooms({
    host: seen,
    clock,
    pool: async () => pool,
    logger: options.logger ?? pino({ level: 'silent' }),
    hostingTtlMs: 3_600_000,
    authorizePublisher: options.authorizePublisher ?? (async () => ({ allowed: true, reason: 'ok' })),
    target: async () => target,
    ...(callsPerPerson === undefined ? {} : { callsPerPerson }),
  });
  return { host, rooms };
}
