import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { HOSTING_TIMER, HOSTING_TTL_MS, mediaRoomTimers } from '../../machines/media-room/media-room.state.js';
import { meetingPolicy, PureRoom, T0 } from '../support/media-room.js';

/**
 * The hosting deadline: the node serving a room's connections vouches for them for a TTL and renews it; when it dies
 * without saying so the deadline lapses and its members are dropped (their grace runs), and a node opening the room
 * afresh drops at once those an earlier process held.
 */

test('a join vouches for the connections until at + hostingTtlMs (default HOSTING_TTL_MS); a renewal moves it without a change members see', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open' }));
  room.join('a');
  assert.is(room.context.hostedUntil, T0 + HOSTING_TTL_MS);
  assert.equal(mediaRoomTimers(room.context), { [HOSTING_TIMER]: T0 + HOSTING_TTL_MS });
  const revision = room.context.revision;
  const renewed = room.advance(20_000).ok({ type: 'room.hosting', ttlMs: 30_000, connectionIds: ['conn-a'] });
  assert.equal([renewed.reply.hostedUntil, renewed.reply.dropped, renewed.changed], [room.now + 30_000, 0, undefined]);
  assert.is(room.context.revision, revision, 'no view change, no broadcast');
  room.ok({ type: 'member.join', memberId: 'b', displayName: 'B', guest: false, moderator: false, connectionId: 'conn-b', hostingTtlMs: 5_000 });
  assert.is(room.context.hostedUntil, room.now + 5_000, 'the newest vouching counts');
});

test('the last connection gone takes the deadline with it; nobody connected, a renewal vouches for nothing', () => {
  const room = new PureRoom(meetingPolicy());
  room.join('a');
  room.ok({ type: 'member.drop', memberId: 'a', connectionId: 'conn-a' });
  assert.is(room.context.hostedUntil, null);
  assert.equal(Object.keys(mediaRoomTimers(room.context)), ['grace:a']);
  assert.equal(room.ok({ type: 'room.hosting', ttlMs: 60_000, connectionIds: [] }).reply.hostedUntil, null);
});

test('a lapsed hosting drops every connected member (grace, screen share stopped) and tells the control plane; an early or stale one changes nothing', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', screenShare: 'speakers', reconnectGraceSeconds: 10 }));
  room.join('a');
  room.join('b');
  room.ok({ type: 'screen.start', memberId: 'a' });
  const dueAt = room.context.hostedUntil!;
  assert.is(room.advance(HOSTING_TTL_MS - 1).send({ type: 'timer.due', name: HOSTING_TIMER, dueAt }).changedSnapshot, false, 'not before it lapses');
  const lapsed = room.advance(1).send({ type: 'timer.due', name: HOSTING_TIMER, dueAt });
  const graceUntil = room.now + 10_000;
  const changes = [
    { kind: 'screen.stopped', memberId: 'a', reason: 'dropped' },
    { kind: 'member.dropped', memberId: 'a', connectionId: 'conn-a', graceUntil },
    { kind: 'member.dropped', memberId: 'b', connectionId: 'conn-b', graceUntil },
  ];
  assert.equal(lapsed.effects, [{ type: 'changedByDeadline', params: { roomId: room.context.roomId, revision: room.context.revision, changes } }]);
  assert.equal(room.context.members.map((m) => [m.memberId, m.presence, m.graceUntil, m.seat]), [['a', 'dropped', graceUntil, 0], ['b', 'dropped', graceUntil, 1]]);
  assert.equal(mediaRoomTimers(room.context), { 'grace:a': graceUntil, 'grace:b': graceUntil });
  assert.is(room.send({ type: 'timer.due', name: HOSTING_TIMER, dueAt }).changedSnapshot, false, 'delivered twice: nothing more');

  const renewedRoom = new PureRoom(meetingPolicy());
  renewedRoom.join('c');
  const first = renewedRoom.context.hostedUntil!;
  renewedRoom.advance(20_000).ok({ type: 'room.hosting', ttlMs: HOSTING_TTL_MS, connectionIds: ['conn-c'] });
  assert.is(renewedRoom.advance(HOSTING_TTL_MS - 20_000).send({ type: 'timer.due', name: HOSTING_TIMER, dueAt: first }).changedSnapshot, false, 'a renewed deadline does not lapse at the old time');
});

test('a hosting naming no connection (the room opened again by a new process) drops at once the members an earlier process held; dropped ones keep their grace', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', reconnectGraceSeconds: 30 }));
  room.join('a');
  room.join('b');
  room.ok({ type: 'member.drop', memberId: 'b', connectionId: 'conn-b' });
  const bGrace = room.member('b')!.graceUntil;
  const reopened = room.advance(5_000).ok({ type: 'room.hosting', ttlMs: HOSTING_TTL_MS, connectionIds: [] });
  assert.equal([reopened.reply.dropped, reopened.reply.hostedUntil], [1, null]);
  assert.equal(reopened.changed?.changes, [{ kind: 'member.dropped', memberId: 'a', connectionId: 'conn-a', graceUntil: room.now + 30_000 }]);
  assert.is(room.member('b')!.graceUntil, bGrace, 'an already dropped member keeps its own grace');
  const back = room.join('a', { connectionId: 'conn-a2' });
  assert.equal([back.resumed, back.seat, room.context.hostedUntil], [true, 0, room.now + HOSTING_TTL_MS]);
});

test('a renewal naming the connections its node serves drops connected members on any other (a drop that was never recorded)', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', reconnectGraceSeconds: 10 }));
  room.join('a');
  room.join('b');
  const renewed = room.advance(20_000).ok({ type: 'room.hosting', ttlMs: HOSTING_TTL_MS, connectionIds: ['conn-a', 'conn-elsewhere'] });
  assert.equal([renewed.reply.dropped, renewed.reply.hostedUntil], [1, room.now + HOSTING_TTL_MS]);
  assert.equal(renewed.changed?.changes, [{ kind: 'member.dropped', memberId: 'b', connectionId: 'conn-b', graceUntil: room.now + 10_000 }]);
  assert.equal(room.context.members.map((m) => [m.memberId, m.presence]), [['a', 'connected'], ['b', 'dropped']]);
  const again = room.advance(1_000).ok({ type: 'room.hosting', ttlMs: HOSTING_TTL_MS, connectionIds: ['conn-a'] });
  assert.equal([again.reply.dropped, again.changed], [0, undefined], 'a dropped member keeps its grace');
});

test('a room stored before the hosting deadline existed (no hostedUntil) reads as not hosted and takes one on the next join', () => {
  const room = new PureRoom(meetingPolicy());
  room.join('a');
  const { hostedUntil: _dropped, ...legacy } = room.context;
  room.snapshot = { ...room.snapshot, context: legacy } as typeof room.snapshot;
  assert.equal(mediaRoomTimers(room.context), {});
  assert.is(room.ok({ type: 'room.hosting', ttlMs: 1_000, connectionIds: ['conn-a'] }).reply.hostedUntil, room.now + 1_000);
});

test.run();
