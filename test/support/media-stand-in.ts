import pino from 'pino';
import type { Test } from 'uvu';
import { mediaRoomKey } from '../../actors/media.actors.js';
import type { MediaConnection } from '../../media/control/media-control.socket.js';
import { MediaWorkerPool } from '../../media/worker-pool.js';
import { createTestDatabase, type TestDatabase } from './database.js';
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
