import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RoomViewSchema } from '../../media/control/media-control.messages.js';
import { mediaRoomView } from '../../machines/media-room/media-room.view.js';
import { HOSTING_TTL_MS, mediaRoomTimers, OFFER_TTL_MS } from '../../machines/media-room/media-room.state.js';
import { directCallPolicy, meetingPolicy, PureRoom, T0, type RoomRequestInput } from '../support/media-room.js';

test('before room.open every request is refused room_not_open; opening sets the policy once', () => {
  const room = new PureRoom();
  assert.is(room.snapshot.value, 'unopened');
  assert.is(room.refused({ type: 'member.join', memberId: 'a', displayName: 'A', guest: false, moderator: true, connectionId: 'c' }), 'room_not_open');
  assert.is(room.refused({ type: 'hand.raise', memberId: 'a' }), 'room_not_open');
  assert.is(room.send({ type: 'timer.due', name: 'grace:a', dueAt: room.now }).changedSnapshot, false);
  const opened = room.ok({ type: 'room.open', policy: meetingPolicy() });
  assert.is(room.snapshot.value, 'open');
  assert.equal(opened.changed?.changes, [{ kind: 'policy.set' }]);
  assert.is(opened.reply.revision, 1);
  const again = room.ok({ type: 'room.open', policy: { ...meetingPolicy(), screenProfile: undefined } });
  assert.is(again.changed, undefined, 'the same policy (an absent optional field is the same) changes nothing');
  assert.is(again.reply.revision, 1);
});

test('a different policy is refused policy_changed while anyone is in the room, taken when it is empty', () => {
  const room = new PureRoom(meetingPolicy());
  room.join('mod', { moderator: true });
  assert.is(room.refused({ type: 'room.open', policy: meetingPolicy({ maxSpeakerSeats: 4 }) }), 'policy_changed');
  room.ok({ type: 'member.drop', memberId: 'mod', connectionId: 'conn-mod' });
  assert.is(room.refused({ type: 'room.open', policy: meetingPolicy({ maxSpeakerSeats: 4 }) }), 'policy_changed', 'a dropped member still counts');
  room.ok({ type: 'member.leave', memberId: 'mod' });
  room.ok({ type: 'room.open', policy: meetingPolicy({ maxSpeakerSeats: 4 }) });
  assert.is(room.context.policy?.maxSpeakerSeats, 4);
});

test('a policy the room cannot honour is refused policy_invalid', () => {
  const room = new PureRoom();
  for (const policy of [
    directCallPolicy({ guestPolicy: 'allowed' }),
    directCallPolicy({ maxSpeakerSeats: 1 }),
    directCallPolicy({ screenShare: 'owners' }),
    meetingPolicy({ guestPolicy: 'callee_only' }),
    meetingPolicy({ reconnectGraceSeconds: 3 }),
    meetingPolicy({ maxParticipants: 151 }),
    meetingPolicy({ maxSpeakerSeats: 0 }),
  ]) {
    assert.is(room.refused({ type: 'room.open', policy }), 'policy_invalid', JSON.stringify(policy));
  }
  assert.is(room.context.policy, null);
});

test('every request of someone not in the room is refused not_member; moderator requests on strangers target_not_member', () => {
  const room = new PureRoom(meetingPolicy({ screenShare: 'owners' }));
  const requests: RoomRequestInput[] = [
    { type: 'member.leave', memberId: 'x' },
    { type: 'floor.take', memberId: 'x' },
    { type: 'floor.release', memberId: 'x' },
    { type: 'speaker.revoke', memberId: 'x', target: 'y' },
    { type: 'speaker.offer', memberId: 'x', target: 'y' },
    { type: 'speaker.accept', memberId: 'x' },
    { type: 'speaker.decline', memberId: 'x' },
    { type: 'hand.raise', memberId: 'x' },
    { type: 'hand.lower', memberId: 'x' },
    { type: 'hand.dismiss', memberId: 'x', target: 'y' },
    { type: 'screen.start', memberId: 'x' },
    { type: 'screen.stop', memberId: 'x' },
    { type: 'publish.check', memberId: 'x', source: 'microphone' },
  ];
  for (const request of requests) assert.is(room.refused(request), 'not_member', request.type);
  room.join('mod', { moderator: true });
  assert.is(room.refused({ type: 'speaker.revoke', memberId: 'mod', target: 'y' }), 'target_not_member');
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'mod', target: 'y' }), 'target_not_member');
  assert.is(room.refused({ type: 'hand.dismiss', memberId: 'mod', target: 'y' }), 'target_not_member');
  const drop = room.ok({ type: 'member.drop', memberId: 'x', connectionId: 'c' });
  assert.equal([drop.reply.dropped, drop.changed], [false, undefined], 'a drop of a stranger changes nothing');
});

test('guest policies: account_required, allowed, and callee_only (a guest may answer a direct call, never start one)', () => {
  const strict = new PureRoom(meetingPolicy({ guestPolicy: 'account_required' }));
  assert.is(strict.refused({ type: 'member.join', memberId: 'g', displayName: 'G', guest: true, moderator: false, connectionId: 'c' }), 'guest_not_allowed');
  strict.join('a');
  const open = new PureRoom(meetingPolicy({ guestPolicy: 'allowed' }));
  assert.is(open.join('g', { guest: true }).resumed, false);

  const call = new PureRoom(directCallPolicy());
  assert.is(call.refused({ type: 'member.join', memberId: 'g', displayName: 'G', guest: true, moderator: false, connectionId: 'c' }), 'guest_not_allowed');
  call.join('caller');
  assert.is(call.join('g', { guest: true }).seat, 1, 'the guest callee is admitted and seated');
  const accountsOnly = new PureRoom(directCallPolicy({ guestPolicy: 'account_required' }));
  accountsOnly.join('caller');
  assert.is(accountsOnly.refused({ type: 'member.join', memberId: 'g', displayName: 'G', guest: true, moderator: false, connectionId: 'c' }), 'guest_not_allowed');
});

test('room_full counts dropped members inside their grace; a direct call holds exactly two, both seated', () => {
  const room = new PureRoom(meetingPolicy({ maxParticipants: 2 }));
  room.join('a');
  room.join('b');
  const third = { type: 'member.join', memberId: 'c', displayName: 'C', guest: false, moderator: false, connectionId: 'cc' } as const;
  assert.is(room.refused(third), 'room_full');
  room.ok({ type: 'member.drop', memberId: 'b', connectionId: 'conn-b' });
  assert.is(room.refused(third), 'room_full', 'b keeps its place during the grace');
  room.advance(30_000).send({ type: 'timer.due', name: 'grace:b', dueAt: room.now });
  assert.is(room.join('c').resumed, false, 'the place frees when the grace ends');

  const call = new PureRoom(directCallPolicy());
  assert.is(call.join('a').seat, 0);
  assert.is(call.join('b').seat, 1);
  assert.is(call.refused({ ...third }), 'room_full');
});

test('open floor: seated on join while seats are free, then listeners who take, release and retake seats', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', maxSpeakerSeats: 2 }));
  assert.is(room.join('a').seat, 0);
  assert.is(room.join('b').seat, 1);
  assert.is(room.join('c').seat, null);
  assert.is(room.refused({ type: 'floor.take', memberId: 'c' }), 'seats_full');
  const released = room.ok({ type: 'floor.release', memberId: 'a' });
  assert.equal(released.changed?.changes, [{ kind: 'seat.freed', memberId: 'a', seat: 0, reason: 'released' }]);
  assert.is(room.ok({ type: 'floor.release', memberId: 'a' }).changed, undefined, 'releasing again changes nothing');
  const taken = room.ok({ type: 'floor.take', memberId: 'c' });
  assert.is(taken.reply.seat, 0, 'the lowest free seat');
  assert.is(room.ok({ type: 'floor.take', memberId: 'c' }).changed, undefined, 'taking a held seat again changes nothing');
  assert.equal(room.seats(), { a: null, b: 1, c: 0 });
});

test('moderated floor: moderators are seated on join, others listen and only a moderator may take a seat', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'moderated', maxSpeakerSeats: 1 }));
  assert.is(room.join('a').seat, null);
  assert.is(room.join('mod', { moderator: true }).seat, 0);
  assert.is(room.join('mod2', { moderator: true }).seat, null, 'no free seat left');
  assert.is(room.refused({ type: 'floor.take', memberId: 'a' }), 'floor_moderated');
  assert.is(room.refused({ type: 'floor.take', memberId: 'mod2' }), 'seats_full');
  room.ok({ type: 'floor.release', memberId: 'mod' });
  assert.is(room.ok({ type: 'floor.take', memberId: 'mod2' }).reply.seat, 0);
});

test('fixed floor: only moderators hold seats; take and offers are refused floor_fixed', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'fixed', mode: 'stage' }));
  assert.is(room.join('host', { moderator: true }).seat, 0);
  assert.is(room.join('a').seat, null);
  assert.is(room.refused({ type: 'floor.take', memberId: 'a' }), 'floor_fixed');
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'host', target: 'a' }), 'floor_fixed');
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'a', target: 'host' }), 'floor_fixed');
});

test('speaker.revoke: moderators only; frees the seat and ends a speaker share; revoking a listener changes nothing', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', screenShare: 'speakers' }));
  room.join('mod', { moderator: true });
  room.join('a');
  room.join('b');
  assert.is(room.refused({ type: 'speaker.revoke', memberId: 'a', target: 'mod' }), 'not_moderator');
  room.ok({ type: 'screen.start', memberId: 'a' });
  const revoked = room.ok({ type: 'speaker.revoke', memberId: 'mod', target: 'a' });
  assert.equal(revoked.changed?.changes, [
    { kind: 'screen.stopped', memberId: 'a', reason: 'seat_lost' },
    { kind: 'seat.freed', memberId: 'a', seat: 1, reason: 'revoked' },
  ]);
  assert.is(room.context.screen, null);
  assert.is(room.ok({ type: 'speaker.revoke', memberId: 'mod', target: 'b' }).changed, undefined);
});

test('raise hand: disabled rooms refuse; the queue keeps raise order; raising again keeps the place; speakers cannot raise', () => {
  const off = new PureRoom(meetingPolicy({ raiseHand: 'disabled' }));
  off.join('mod', { moderator: true });
  off.join('a');
  assert.is(off.refused({ type: 'hand.raise', memberId: 'a' }), 'raise_hand_disabled');
  assert.is(off.refused({ type: 'hand.lower', memberId: 'a' }), 'raise_hand_disabled');
  assert.is(off.refused({ type: 'hand.dismiss', memberId: 'mod', target: 'a' }), 'raise_hand_disabled');

  const room = new PureRoom(meetingPolicy());
  room.join('mod', { moderator: true });
  for (const id of ['a', 'b', 'c', 'd']) room.join(id);
  assert.is(room.refused({ type: 'hand.raise', memberId: 'mod' }), 'already_speaker');
  assert.is(room.ok({ type: 'hand.raise', memberId: 'c' }).reply.position, 1);
  assert.is(room.advance(1_000).ok({ type: 'hand.raise', memberId: 'a' }).reply.position, 2);
  assert.is(room.advance(1_000).ok({ type: 'hand.raise', memberId: 'd' }).reply.position, 3);
  const again = room.advance(1_000).ok({ type: 'hand.raise', memberId: 'c' });
  assert.equal([again.reply.position, again.changed], [1, undefined], 'raising again keeps the first place');
  assert.equal(room.handQueue(), ['c', 'a', 'd']);
  assert.equal(room.context.hands.map((h) => h.raisedAt - room.context.hands[0]!.raisedAt), [0, 1_000, 2_000]);
  room.ok({ type: 'hand.lower', memberId: 'a' });
  assert.is(room.ok({ type: 'hand.lower', memberId: 'a' }).changed, undefined);
  assert.is(room.refused({ type: 'hand.dismiss', memberId: 'b', target: 'c' }), 'not_moderator');
  const dismissed = room.ok({ type: 'hand.dismiss', memberId: 'mod', target: 'c' });
  assert.equal(dismissed.changed?.changes, [{ kind: 'hand.lowered', memberId: 'c', reason: 'dismissed' }]);
  assert.equal(room.handQueue(), ['d']);
  assert.is(room.ok({ type: 'hand.raise', memberId: 'a' }).reply.position, 2, 'a raised later goes to the back');
});

test('speaker offers: moderator only, to a listener, one per target, only with a free seat; accept seats and lowers the hand', () => {
  const room = new PureRoom(meetingPolicy({ maxSpeakerSeats: 2 }));
  room.join('mod', { moderator: true });
  room.join('a');
  room.join('b');
  room.ok({ type: 'hand.raise', memberId: 'a' });
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'b', target: 'a' }), 'not_moderator');
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'mod', target: 'mod' }), 'already_speaker');
  assert.is(room.refused({ type: 'speaker.accept', memberId: 'a' }), 'no_offer');
  assert.is(room.refused({ type: 'speaker.decline', memberId: 'a' }), 'no_offer');
  const offered = room.ok({ type: 'speaker.offer', memberId: 'mod', target: 'a' });
  assert.is(offered.reply.expiresAt, room.now + OFFER_TTL_MS);
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'mod', target: 'a' }), 'offer_pending');
  assert.equal(mediaRoomTimers(room.context), { 'offer:a': room.now + OFFER_TTL_MS, hosting: T0 + HOSTING_TTL_MS });
  const accepted = room.ok({ type: 'speaker.accept', memberId: 'a' });
  assert.is(accepted.reply.seat, 1);
  assert.equal(accepted.changed?.changes, [
    { kind: 'offer.closed', target: 'a', reason: 'accepted' },
    { kind: 'seat.taken', memberId: 'a', seat: 1, via: 'offer' },
    { kind: 'hand.lowered', memberId: 'a', reason: 'seated' },
  ]);
  assert.equal(room.handQueue(), []);
  assert.equal(mediaRoomTimers(room.context), { hosting: T0 + HOSTING_TTL_MS });
  assert.is(room.refused({ type: 'speaker.offer', memberId: 'mod', target: 'b' }), 'seats_full');
  room.ok({ type: 'floor.release', memberId: 'a' });
  room.ok({ type: 'speaker.offer', memberId: 'mod', target: 'b' });
  const declined = room.ok({ type: 'speaker.decline', memberId: 'b' });
  assert.equal(declined.changed?.changes, [{ kind: 'offer.closed', target: 'b', reason: 'declined' }]);
  assert.is(room.member('b')?.seat, null);
});

test('an accept after the seats filled is refused seats_full and the offer waits; offers expire on their durable timer', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', maxSpeakerSeats: 1 }));
  room.join('mod', { moderator: true });
  room.join('a');
  room.join('b');
  room.ok({ type: 'floor.release', memberId: 'mod' });
  room.ok({ type: 'speaker.offer', memberId: 'mod', target: 'a' });
  room.ok({ type: 'floor.take', memberId: 'b' });
  assert.is(room.refused({ type: 'speaker.accept', memberId: 'a' }), 'seats_full');
  assert.ok(room.context.offers.some((o) => o.target === 'a'), 'the offer is still pending');
  const dueAt = room.context.offers[0]!.expiresAt;
  const early = room.advance(OFFER_TTL_MS - 1).send({ type: 'timer.due', name: 'offer:a', dueAt });
  assert.is(early.changedSnapshot, false, 'a timer delivered early changes nothing');
  const expired = room.advance(1).send({ type: 'timer.due', name: 'offer:a', dueAt });
  assert.equal(expired.emitted, [{ type: 'room.changed', revision: room.context.revision, changes: [{ kind: 'offer.closed', target: 'a', reason: 'expired' }] }]);
  assert.equal(expired.effects, [
    { type: 'changedByDeadline', params: { roomId: room.context.roomId, revision: room.context.revision, changes: [{ kind: 'offer.closed', target: 'a', reason: 'expired' }] } },
  ]);
  assert.is(room.send({ type: 'timer.due', name: 'offer:a', dueAt }).changedSnapshot, false, 'delivered twice: the second changes nothing');
  assert.is(room.refused({ type: 'speaker.accept', memberId: 'a' }), 'no_offer');
});

test('a dropped member keeps seat, hand and offer through its grace and resumes them on join; a stale drop is ignored', () => {
  const room = new PureRoom(meetingPolicy({ maxSpeakerSeats: 3, reconnectGraceSeconds: 20 }));
  room.join('mod', { moderator: true });
  room.join('a', { connectionId: 'a-1' });
  room.join('b');
  room.ok({ type: 'hand.raise', memberId: 'b' });
  room.advance(10).ok({ type: 'hand.raise', memberId: 'a' });
  room.ok({ type: 'speaker.offer', memberId: 'mod', target: 'a' });
  const stale = room.ok({ type: 'member.drop', memberId: 'a', connectionId: 'a-0' });
  assert.equal([stale.reply.dropped, stale.changed], [false, undefined]);
  const dropped = room.ok({ type: 'member.drop', memberId: 'a', connectionId: 'a-1' });
  assert.equal(dropped.reply, { type: 'room.reply', request: 'member.drop', revision: room.context.revision, memberId: 'a', dropped: true, graceUntil: room.now + 20_000 });
  assert.is(mediaRoomTimers(room.context)['grace:a'], room.now + 20_000);
  assert.is(room.ok({ type: 'member.drop', memberId: 'a', connectionId: 'a-1' }).changed, undefined, 'dropping twice changes nothing');
  room.advance(19_000);
  const resumed = room.join('a', { connectionId: 'a-2' });
  assert.equal(resumed, { type: 'room.reply', request: 'member.join', revision: room.context.revision, memberId: 'a', resumed: true, closeConnectionId: 'a-1', seat: null });
  assert.equal(room.handQueue(), ['b', 'a'], 'the hand kept its place');
  assert.ok(room.context.offers.some((o) => o.target === 'a'), 'the offer survived');
  assert.equal([room.member('a')?.presence, room.member('a')?.graceUntil], ['connected', null]);
  assert.is(room.advance(2_000).send({ type: 'timer.due', name: 'grace:a', dueAt: room.now }).changedSnapshot, false, 'the old grace timer is stale');
  assert.ok(room.member('a'));
});

test('a join of a connected member replaces its connection (closeConnectionId); the same connection again changes nothing', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open' }));
  room.join('a', { connectionId: 'tab-1' });
  const same = room.ok({ type: 'member.join', memberId: 'a', displayName: 'A', guest: false, moderator: false, connectionId: 'tab-1' });
  assert.equal([same.reply.resumed, same.reply.closeConnectionId, same.reply.seat, same.changed], [true, null, 0, undefined]);
  const replaced = room.ok({ type: 'member.join', memberId: 'a', displayName: 'Ann', guest: false, moderator: false, connectionId: 'tab-2' });
  assert.equal([replaced.reply.resumed, replaced.reply.closeConnectionId, replaced.reply.seat], [true, 'tab-1', 0]);
  assert.equal(replaced.changed?.changes, [{ kind: 'member.resumed', memberId: 'a', closedConnectionId: 'tab-1' }]);
  assert.equal([room.member('a')?.connectionId, room.member('a')?.displayName], ['tab-2', 'Ann']);
});

test('a grace that ends removes the member with its seat, hand and offer, and tells the control plane', () => {
  const room = new PureRoom(meetingPolicy({ floorControl: 'open', maxSpeakerSeats: 1, reconnectGraceSeconds: 5 }));
  room.join('a');
  room.join('mod', { moderator: true });
  room.join('b');
  room.ok({ type: 'hand.raise', memberId: 'b' });
  room.ok({ type: 'member.drop', memberId: 'a', connectionId: 'conn-a' });
  room.ok({ type: 'member.drop', memberId: 'b', connectionId: 'conn-b' });
  const dueAt = room.member('a')!.graceUntil!;
  assert.is(room.advance(4_999).send({ type: 'timer.due', name: 'grace:a', dueAt }).changedSnapshot, false, 'not before the grace ends');
  const expired = room.advance(1).send({ type: 'timer.due', name: 'grace:a', dueAt });
  const changes = [
    { kind: 'seat.freed', memberId: 'a', seat: 0, reason: 'left' },
    { kind: 'member.left', memberId: 'a', connectionId: 'conn-a', reason: 'grace_expired' },
  ];
  assert.equal(expired.effects, [{ type: 'changedByDeadline', params: { roomId: room.context.roomId, revision: room.context.revision, changes } }]);
  assert.is(room.member('a'), undefined);
  room.ok({ type: 'speaker.offer', memberId: 'mod', target: 'b' });
  room.advance(1).send({ type: 'timer.due', name: 'grace:b', dueAt: room.member('b')!.graceUntil! });
  assert.equal(room.context.hands, []);
  assert.equal(room.context.offers, []);
  assert.equal(mediaRoomTimers(room.context), { hosting: T0 + HOSTING_TTL_MS }, 'mod is still connected');
});

test('screen share per policy: disabled, owners (moderators), speakers (seated); one sharer; the encoding hint', () => {
  const off = new PureRoom(meetingPolicy({ screenShare: 'disabled' }));
  off.join('mod', { moderator: true });
  assert.is(off.refused({ type: 'screen.start', memberId: 'mod' }), 'screen_disabled');

  const owners = new PureRoom(meetingPolicy({ screenShare: 'owners', maxSpeakerSeats: 1, screenProfile: 'motion' }));
  owners.join('seated', { moderator: true });
  owners.join('mod', { moderator: true });
  owners.join('a');
  assert.is(owners.refused({ type: 'screen.start', memberId: 'a' }), 'not_moderator');
  const started = owners.ok({ type: 'screen.start', memberId: 'mod' });
  assert.is(started.reply.screenProfile, 'motion');
  assert.equal(started.changed?.changes, [{ kind: 'screen.started', memberId: 'mod', screenProfile: 'motion' }]);
  assert.is(owners.refused({ type: 'screen.start', memberId: 'seated' }), 'screen_busy');
  assert.is(owners.ok({ type: 'screen.start', memberId: 'mod' }).changed, undefined, 'starting again changes nothing');
  assert.is(owners.ok({ type: 'screen.stop', memberId: 'seated' }).changed, undefined, 'only the sharer stops its share');
  owners.ok({ type: 'screen.stop', memberId: 'mod' });
  assert.is(owners.context.screen, null);

  const speakers = new PureRoom(meetingPolicy({ screenShare: 'speakers', floorControl: 'open', maxSpeakerSeats: 1 }));
  speakers.join('a');
  speakers.join('b');
  assert.is(speakers.refused({ type: 'screen.start', memberId: 'b' }), 'not_speaker');
  assert.is(speakers.ok({ type: 'screen.start', memberId: 'a' }).reply.screenProfile, 'slides', 'slides when the policy names none');
});

test('a share ends when the sharer loses its seat, drops, leaves, or (owners) is no longer a moderator', () => {
  const speakers = new PureRoom(meetingPolicy({ screenShare: 'speakers', floorControl: 'open' }));
  speakers.join('a');
  speakers.join('b');
  speakers.ok({ type: 'screen.start', memberId: 'a' });
  assert.equal(speakers.ok({ type: 'floor.release', memberId: 'a' }).changed?.changes[0], { kind: 'screen.stopped', memberId: 'a', reason: 'seat_lost' });
  speakers.ok({ type: 'screen.start', memberId: 'b' });
  assert.equal(speakers.ok({ type: 'member.drop', memberId: 'b', connectionId: 'conn-b' }).changed?.changes[0], { kind: 'screen.stopped', memberId: 'b', reason: 'dropped' });
  speakers.ok({ type: 'floor.take', memberId: 'a' });
  speakers.ok({ type: 'screen.start', memberId: 'a' });
  const left = speakers.ok({ type: 'member.leave', memberId: 'a' });
  assert.equal(left.changed?.changes, [
    { kind: 'screen.stopped', memberId: 'a', reason: 'left' },
    { kind: 'seat.freed', memberId: 'a', seat: 0, reason: 'left' },
    { kind: 'member.left', memberId: 'a', connectionId: 'conn-a', reason: 'left' },
  ]);

  const owners = new PureRoom(meetingPolicy({ screenShare: 'owners' }));
  owners.join('m', { moderator: true, connectionId: 'm-1' });
  owners.ok({ type: 'screen.start', memberId: 'm' });
  owners.join('m', { moderator: false, connectionId: 'm-2' });
  assert.is(owners.context.screen, null);
});

test('publish.check reads without changing: microphone needs a seat, screen needs to be the sharer', () => {
  const room = new PureRoom(meetingPolicy({ screenShare: 'speakers', floorControl: 'open', maxSpeakerSeats: 1 }));
  room.join('a');
  room.join('b');
  room.ok({ type: 'screen.start', memberId: 'a' });
  const before = room.context;
  const check = (memberId: string, source: 'microphone' | 'screen') => {
    const { reply, changed } = room.ok({ type: 'publish.check', memberId, source });
    assert.is(changed, undefined);
    return [reply.allowed, reply.denial];
  };
  assert.equal(check('a', 'microphone'), [true, null]);
  assert.equal(check('a', 'screen'), [true, null]);
  assert.equal(check('b', 'microphone'), [false, 'not_speaker']);
  assert.equal(check('b', 'screen'), [false, 'not_sharing']);
  assert.is(room.context, before);
});

test('the client view: roles, connection, ordered hands, offers, sharer and policy summary, valid for room.state', () => {
  const room = new PureRoom(meetingPolicy({ roleAuthorityUrl: 'https://env.example/authority', screenShare: 'owners' }), 'weekly:standup');
  room.join('mod', { moderator: true });
  room.join('a');
  room.join('b');
  room.ok({ type: 'hand.raise', memberId: 'b' });
  room.advance(1_000).ok({ type: 'hand.raise', memberId: 'a' });
  room.ok({ type: 'speaker.offer', memberId: 'mod', target: 'a' });
  room.ok({ type: 'screen.start', memberId: 'mod' });
  room.ok({ type: 'member.drop', memberId: 'b', connectionId: 'conn-b' });
  const view = RoomViewSchema.parse(mediaRoomView(room.context));
  assert.is(view.roomId, room.context.roomId);
  assert.is(view.scope, 'weekly:standup');
  assert.is(view.revision, room.context.revision);
  assert.equal(view.policy, {
    maxParticipants: 10,
    maxSpeakerSeats: 2,
    floorControl: 'moderated',
    raiseHand: 'enabled',
    screenShare: 'owners',
    screenProfile: 'slides',
    encryption: 'transport',
    reconnectGraceSeconds: 30,
  });
  assert.equal(
    view.members.map((m) => [m.memberId, m.role, m.seated, m.connection]),
    [['mod', 'moderator', true, 'connected'], ['a', 'listener', false, 'connected'], ['b', 'listener', false, 'dropped']],
  );
  assert.is(view.members[2]!.graceUntil, new Date(room.now + 30_000).toISOString());
  assert.equal(view.handQueue, ['b', 'a']);
  assert.equal(view.offers, [{ target: 'a', by: 'mod', expiresAt: new Date(room.now + OFFER_TTL_MS).toISOString() }]);
  assert.is(view.screenSharer, 'mod');
  room.ok({ type: 'speaker.accept', memberId: 'a' });
  assert.is(mediaRoomView(room.context)?.members[1]?.role, 'speaker');
  assert.is(mediaRoomView(new PureRoom().context), null);
});

test.run();
