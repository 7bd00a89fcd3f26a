import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKey } from '../../actors/media.actors.js';
import type { MediaRoomContext } from '../../machines/media-room/media-room.state.js';
import { mediaRoomView } from '../../machines/media-room/media-room.view.js';
import { MEDIA_LIMITS, ROOM_STATE_INTERVAL_MS, RoomViewAssembler, type MediaV2ServerMessage, type RoomView } from '../../media/control/media-control.messages.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { jsonCodec, msgpackCodec } from '../../transport/ws/codecs.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { ENV, meetingPolicy, T0 } from '../support/media-room.js';

/**
 * A full stage (150 members, every listener's hand up, a hundred speaker offers out) is the largest room view there
 * is. Every message the control plane sends its members, and every answer to a join, fits in the contract's
 * maxMessageBytes in either codec, and every member assembles the same whole view from what it was sent.
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

const LIMIT = MEDIA_LIMITS.maxMessageBytes;
const frameBytes = (message: unknown): { json: number; msgpack: number } => ({
  json: Buffer.byteLength(jsonCodec.encode(message) as string),
  msgpack: (msgpackCodec.encode(message) as Uint8Array).byteLength,
});
/** A pairwise actor id as the registry mints them (`act_` and 26 base32 characters). */
const actorId = (i: number): string => `act_${String(i).padStart(3, '0')}${'q'.repeat(23)}`;

type StandIn = ReturnType<typeof standInConnection>;

/** The views a member put together from what it was sent, in the order they were complete. */
function viewsOf(standIn: StandIn): RoomView[] {
  const assembler = new RoomViewAssembler();
  return standIn.sent.flatMap((m) => assembler.accept(m as MediaV2ServerMessage) ?? []);
}

test('a full stage: every message to every member and every join answer fits maxMessageBytes in JSON and msgpack; each join answer follows the view of the join; all assemble the same view', async () => {
  const clock = new ManualClock(T0);
  const store = new PostgresActorStore(db.connection);
  const policy = meetingPolicy({ mode: 'stage', maxParticipants: MEDIA_LIMITS.maxParticipantsPerContext, maxSpeakerSeats: 16, floorControl: 'moderated', raiseHand: 'enabled', guestPolicy: 'account_required' });
  const { host, rooms } = standInRooms({ store, clock, pool, target: { kind: 'space', policy, violations: [] }, timerPollMs: 1_000 });
  const scope = 'arena';
  const speakScopes = ['media:connect', 'media:join-space', 'media:request-speak'];
  const mod = standInConnection('conn-mod', actorId(0), scope, { scopes: [...speakScopes, 'media:publish'], environmentRoles: ['admin'] });
  const listeners = Array.from({ length: MEDIA_LIMITS.maxParticipantsPerContext - 1 }, (_, i) => standInConnection(`conn-${i + 1}`, actorId(i + 1), scope, { scopes: speakScopes }));
  const everyone = [mod, ...listeners];
  const ask = (standIn: StandIn, message: Record<string, unknown>) => rooms!.request(asConnection(standIn), { id: 'r', ...message } as never);

  const oversized: string[] = [];
  const check = (who: string, message: unknown): void => {
    const { json, msgpack } = frameBytes(message);
    if (json > LIMIT || msgpack > LIMIT) oversized.push(`${who} ${(message as { type: string }).type}: ${json} B JSON, ${msgpack} B msgpack`);
  };
  const joinedUnseen: string[] = [];
  for (const standIn of everyone) {
    const result = await ask(standIn, { type: 'room.join', rtpCapabilities: {} });
    check(standIn.id, { type: 'response', id: 'r', ok: true, result });
    // The answer follows the whole view of the join (or a newer one): the joiner is in the view it holds by then.
    const held = viewsOf(standIn).at(-1);
    if (!held?.members.some((m) => m.memberId === standIn.user.memberId) || held.revision < (result.revision as number)) joinedUnseen.push(standIn.id);
  }
  assert.equal(joinedUnseen, [], 'a join answer came before the view of the join');
  await Promise.all(listeners.map((l) => ask(l, { type: 'hand.raise' })));
  for (const l of listeners.slice(0, 100)) await ask(mod, { type: 'speaker.offer', target: l.user.memberId });
  clock.advance(2 * ROOM_STATE_INTERVAL_MS);
  await new Promise((r) => setTimeout(r, 50));

  for (const standIn of everyone) for (const message of standIn.sent) check(standIn.id, message);
  const context = (await host.readCommitted(MEDIA_ROOM_KIND, mediaRoomKey(ENV, scope)))?.state as { context: MediaRoomContext };
  const expected = mediaRoomView(context.context);
  await rooms.close();
  await host.drain();
  assert.equal(oversized.slice(0, 5), [], `${oversized.length} messages over ${LIMIT} bytes`);
  assert.is(expected?.members.length, 150);
  assert.is(expected?.handQueue.length, 149);
  assert.is(expected?.offers.length, 100);
  for (const standIn of everyone) assert.equal(viewsOf(standIn).at(-1), expected, `${standIn.id} ends on another view`);
});

test.run();
