import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { InvalidActorKeyError } from '../../actors/errors.js';
import { MEDIA_ROOM_KIND, mediaRoomKey, mediaRoomKind } from '../../actors/media.actors.js';
import type { MediaRoomEmitted, MediaRoomReply } from '../../machines/media-room/media-room.events.js';
import type { DeadlineChange } from '../../machines/media-room/media-room.machine.js';
import type { MediaRoomContext } from '../../machines/media-room/media-room.state.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { rejects } from '../support/assert.js';
import { hostFor, withActorStore } from '../support/host.js';
import { ENV, meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

let store: PostgresActorStore;

withActorStore(test, (opened) => ({ store } = opened));

/** These tests send no hosting renewals: the joining node vouches for its connections for an hour. */
const HOUR = 3_600_000;
const join = (memberId: string, connectionId: string, moderator = false) =>
  ({ type: 'member.join', memberId, displayName: memberId, guest: false, moderator, connectionId, hostingTtlMs: HOUR }) as const;

function replyOf(emitted: readonly unknown[]): MediaRoomReply {
  const reply = (emitted as readonly MediaRoomEmitted[]).find((e): e is MediaRoomReply => e.type === 'room.reply');
  if (!reply) throw new Error(`no reply in ${JSON.stringify(emitted)}`);
  return reply;
}

async function storedRoom(key: string): Promise<MediaRoomContext | undefined> {
  return ((await store.load(MEDIA_ROOM_KIND, key))?.snapshot as { context: MediaRoomContext } | undefined)?.context;
}

test('room keys are <environmentId>.<scope>; anything else is refused before storage is touched', async () => {
  const host = hostFor(store, new ManualClock(T0), [mediaRoomKind(() => {})]);
  for (const key of ['lobby', `${ENV}.`, `${ENV}.has space`, `${ENV}._lead`, `env_short.lobby`, `${ENV}.${'s'.repeat(97)}`]) {
    await rejects(() => host.send(MEDIA_ROOM_KIND, key, { type: 'room.open', policy: meetingPolicy() }), (e: unknown) => e instanceof InvalidActorKeyError);
  }
  const reply = await host.send(MEDIA_ROOM_KIND, mediaRoomKey(ENV, 'Team:daily_1-a'), { type: 'room.open', policy: meetingPolicy() });
  assert.is(replyOf(reply.emitted).request, 'room.open');
  assert.is((reply.snapshot.context as MediaRoomContext).scope, 'Team:daily_1-a');
  await host.drain();
});

test("a dropped member's grace timer survives a host restart and removes the member; the rest is restored from Postgres", async () => {
  const key = mediaRoomKey(ENV, 'restart');
  const clock = new ManualClock(T0);
  const first = hostFor(store, clock, [mediaRoomKind(() => {})], { timerPollMs: 1_000 });
  first.start();
  await first.send(MEDIA_ROOM_KIND, key, { type: 'room.open', policy: meetingPolicy({ reconnectGraceSeconds: 30 }) });
  await first.send(MEDIA_ROOM_KIND, key, join('mod', 'mod-1', true));
  await first.send(MEDIA_ROOM_KIND, key, join('ann', 'ann-1'));
  await first.send(MEDIA_ROOM_KIND, key, { type: 'hand.raise', memberId: 'ann' });
  const dropped = replyOf((await first.send(MEDIA_ROOM_KIND, key, { type: 'member.drop', memberId: 'mod', connectionId: 'mod-1' })).emitted);
  assert.equal(dropped.request === 'member.drop' && dropped.graceUntil, T0 + 30_000);
  assert.equal((await store.load(MEDIA_ROOM_KIND, key))?.timers, { 'grace:mod': T0 + 30_000, hosting: T0 + HOUR });
  await first.drain(); // the process goes away inside mod's grace

  const notices: DeadlineChange[] = [];
  const later = new ManualClock(T0 + 31_000);
  const second = hostFor(store, later, [mediaRoomKind((change) => notices.push(change))], { timerPollMs: 1_000 });
  second.start();
  later.advance(0); // the poller's first run finds the overdue deadline
  const room = await waitFor(async () => {
    const context = await storedRoom(key);
    return context && !context.members.some((m) => m.memberId === 'mod') ? context : undefined;
  }, 'the grace to end after the restart');
  assert.equal(room.members.map((m) => [m.memberId, m.presence]), [['ann', 'connected']]);
  assert.equal(room.hands.map((h) => h.memberId), ['ann'], 'the hand queue came back from Postgres');
  assert.is(room.policy?.reconnectGraceSeconds, 30);
  assert.equal((await store.load(MEDIA_ROOM_KIND, key))?.timers, { hosting: T0 + HOUR }, 'no deadline but the hosting of ann is left');
  await waitFor(() => notices.length > 0, 'the control plane to be told');
  assert.equal(notices, [
    {
      roomId: key,
      revision: room.revision,
      changes: [
        { kind: 'seat.freed', memberId: 'mod', seat: 0, reason: 'left' },
        { kind: 'member.left', memberId: 'mod', connectionId: 'mod-1', reason: 'grace_expired' },
      ],
    },
  ]);
  const journal = await store.readJournal(MEDIA_ROOM_KIND, key, { limit: 1 });
  assert.is((journal[0]!.event as { type: string; name: string }).name, 'grace:mod');
  await second.drain();
});

test('a room restored after a restart resumes a member inside its grace with the same seat and hand', async () => {
  const key = mediaRoomKey(ENV, 'resume');
  const clock = new ManualClock(T0);
  const first = hostFor(store, clock, [mediaRoomKind(() => {})]);
  await first.send(MEDIA_ROOM_KIND, key, { type: 'room.open', policy: meetingPolicy({ floorControl: 'open', maxSpeakerSeats: 1 }) });
  await first.send(MEDIA_ROOM_KIND, key, join('ann', 'ann-1'));
  await first.send(MEDIA_ROOM_KIND, key, join('bob', 'bob-1'));
  await first.send(MEDIA_ROOM_KIND, key, { type: 'hand.raise', memberId: 'bob' });
  await first.send(MEDIA_ROOM_KIND, key, { type: 'member.drop', memberId: 'ann', connectionId: 'ann-1' });
  await first.drain();

  const notices: DeadlineChange[] = [];
  const second = hostFor(store, new ManualClock(T0 + 10_000), [mediaRoomKind((change) => notices.push(change))]);
  const resumed = replyOf((await second.send(MEDIA_ROOM_KIND, key, join('ann', 'ann-2'))).emitted);
  assert.equal(resumed, { type: 'room.reply', request: 'member.join', revision: resumed.revision, memberId: 'ann', resumed: true, closeConnectionId: 'ann-1', seat: 0 });
  const check = await second.send(MEDIA_ROOM_KIND, key, { type: 'publish.check', memberId: 'bob', source: 'microphone' });
  assert.equal(replyOf(check.emitted), { type: 'room.reply', request: 'publish.check', revision: resumed.revision, memberId: 'bob', source: 'microphone', allowed: false, denial: 'not_speaker' });
  const context = check.snapshot.context as MediaRoomContext;
  assert.equal(context.hands.map((h) => h.memberId), ['bob']);
  assert.equal((await store.load(MEDIA_ROOM_KIND, key))?.timers, { hosting: T0 + 10_000 + HOUR }, 'the resume cleared the grace deadline');
  assert.equal(notices, []);
  await second.drain();
});

test('in a live room the grace and offer deadlines fire when the clock reaches them', async () => {
  const key = mediaRoomKey(ENV, 'live');
  const clock = new ManualClock(T0);
  const notices: DeadlineChange[] = [];
  const host = hostFor(store, clock, [mediaRoomKind((change) => notices.push(change))]);
  await host.send(MEDIA_ROOM_KIND, key, { type: 'room.open', policy: meetingPolicy({ reconnectGraceSeconds: 5 }) });
  await host.send(MEDIA_ROOM_KIND, key, join('mod', 'mod-1', true));
  await host.send(MEDIA_ROOM_KIND, key, join('ann', 'ann-1'));
  await host.send(MEDIA_ROOM_KIND, key, { type: 'speaker.offer', memberId: 'mod', target: 'ann' });
  await host.send(MEDIA_ROOM_KIND, key, { type: 'member.drop', memberId: 'mod', connectionId: 'mod-1' });
  clock.advance(5_000);
  await waitFor(() => notices.length === 1, 'the grace to end');
  assert.equal(notices[0]!.changes.map((c) => c.kind), ['seat.freed', 'member.left']);
  clock.advance(55_000);
  await waitFor(() => notices.length === 2, 'the offer to expire');
  assert.equal(notices[1]!.changes, [{ kind: 'offer.closed', target: 'ann', reason: 'expired' }]);
  const context = (await storedRoom(key))!;
  assert.equal([context.members.map((m) => m.memberId), context.offers], [['ann'], []]);
  await host.drain();
});

test.run();
