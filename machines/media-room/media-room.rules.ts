import type {
  MediaRoomRefusalCode,
  MediaRoomReplyBody,
  MediaRoomRequest,
  MediaRoomTimerDue,
  RoomChange,
} from './media-room.events.js';
import { policyProblem, samePolicy, type RoomPolicy } from './media-room.policy.js';
import {
  graceTimer,
  HOSTING_TIMER,
  HOSTING_TTL_MS,
  offerTimer,
  OFFER_TTL_MS,
  RoomDraft,
  type MediaRoomContext,
  type RoomMember,
} from './media-room.state.js';

/**
 * The room's rules, one pure function per request: the machine calls `decide` and turns its answer into the reply,
 * the new context and the `room.changed` broadcast. Checks run in one order everywhere, so a request that breaks
 * several rules always gets the same code: room (open?) → the sender (a member?) → the policy (feature enabled?) →
 * the sender's role → the target → the current state (seats, offers, sharer).
 *
 * A request whose outcome already holds (raising a raised hand, releasing a seat one does not hold, stopping a share
 * one is not running) succeeds without change: clients and retries need not know the exact current state.
 */
export type Decision =
  | { readonly ok: false; readonly code: MediaRoomRefusalCode; readonly message: string }
  | { readonly ok: true; readonly context: MediaRoomContext; readonly reply: MediaRoomReplyBody; readonly changes: readonly RoomChange[] };

type Of<T extends MediaRoomRequest['type']> = Extract<MediaRoomRequest, { type: T }>;
type Refusal = Extract<Decision, { ok: false }>;

const refuse = (code: MediaRoomRefusalCode, message: string): Refusal => ({ ok: false, code, message });

function done(draft: RoomDraft, reply: MediaRoomReplyBody): Decision {
  return { ok: true, context: draft.result(), reply, changes: draft.changes };
}

export function decide(context: MediaRoomContext, request: MediaRoomRequest): Decision {
  if (request.type === 'room.open') return open(context, request);
  if (context.policy === null) return refuse('room_not_open', 'the room has not been opened');
  const draft = new RoomDraft(context, context.policy);
  if (request.type === 'member.join') return join(draft, request);
  if (request.type === 'member.drop') return drop(draft, request);
  if (request.type === 'room.hosting') return hosting(draft, request);
  const self = draft.member(request.memberId);
  if (!self) return refuse('not_member', `${request.memberId} is not in this room`);
  switch (request.type) {
    case 'member.leave':
      draft.remove(self.memberId, 'left');
      return done(draft, { request: request.type, memberId: self.memberId });
    case 'floor.take':
      return takeFloor(draft, self);
    case 'floor.release':
      draft.unseat(self.memberId, 'released');
      return done(draft, { request: request.type, memberId: self.memberId });
    case 'speaker.revoke':
      return revoke(draft, self, request);
    case 'speaker.offer':
      return offer(draft, self, request);
    case 'speaker.accept':
      return accept(draft, self);
    case 'speaker.decline':
      if (!draft.offerFor(self.memberId)) return refuse('no_offer', 'no speaker offer is pending for you');
      draft.closeOffer(self.memberId, 'declined');
      return done(draft, { request: request.type, memberId: self.memberId });
    case 'hand.raise':
      return raiseHand(draft, self, request.at);
    case 'hand.lower':
      if (draft.policy.raiseHand === 'disabled') return refuse('raise_hand_disabled', 'this room has no raise hand');
      draft.lowerHand(self.memberId, 'lowered');
      return done(draft, { request: request.type, memberId: self.memberId });
    case 'hand.dismiss':
      return dismissHand(draft, self, request);
    case 'screen.start':
      return startScreen(draft, self, request.at);
    case 'screen.stop':
      if (draft.sharer === self.memberId) draft.stopScreen('stopped');
      return done(draft, { request: request.type, memberId: self.memberId });
    case 'publish.check':
      return publishCheck(draft, self, request);
  }
}

/**
 * A room keeps the policy it was opened with while anyone is in it: members were admitted, seated and queued under
 * it, and changing the rules under them would leave states the new policy forbids. An empty room takes a new policy.
 */
function open(context: MediaRoomContext, request: Of<'room.open'>): Decision {
  if (context.policy !== null && samePolicy(context.policy, request.policy)) {
    return { ok: true, context, reply: { request: request.type }, changes: [] };
  }
  const problem = policyProblem(request.policy);
  if (problem) return refuse('policy_invalid', problem);
  if (context.members.length > 0) return refuse('policy_changed', 'the policy cannot change while the room has members');
  const changes: RoomChange[] = [{ kind: 'policy.set' }];
  return { ok: true, context: { ...context, policy: request.policy, revision: context.revision + 1 }, reply: { request: request.type }, changes };
}

function join(draft: RoomDraft, request: Of<'member.join'>): Decision {
  draft.hostUntil(request.at + (request.hostingTtlMs ?? HOSTING_TTL_MS));
  const existing = draft.member(request.memberId);
  if (existing) return resume(draft, existing, request);
  const { policy } = draft;
  if (request.guest) {
    if (policy.guestPolicy === 'account_required') return refuse('guest_not_allowed', 'this room requires an account');
    // callee_only: whoever starts a direct call is its caller, so a guest may only join a call someone else started.
    if (policy.guestPolicy === 'callee_only' && draft.memberCount === 0) return refuse('guest_not_allowed', 'a guest can only answer a direct call');
  }
  if (draft.memberCount >= policy.maxParticipants) return refuse('room_full', `the room holds at most ${policy.maxParticipants} participants`);
  draft.add({
    memberId: request.memberId,
    displayName: request.displayName,
    guest: request.guest,
    moderator: request.moderator,
    connectionId: request.connectionId,
    joinedAt: request.at,
    seat: null,
    presence: 'connected',
    graceUntil: null,
  });
  draft.record({ kind: 'member.joined', memberId: request.memberId });
  const seat = seatedOnJoin(policy, request) ? draft.freeSeat() : null;
  if (seat !== null) draft.seat(request.memberId, seat, 'join');
  return done(draft, { request: request.type, memberId: request.memberId, resumed: false, closeConnectionId: null, seat });
}

/**
 * A seat on join is the seat `floor.take` would give, so the same grant rule holds: a member who may not request to
 * speak (a listen-only grant) would hold a seat it could never have asked for, keeping a speaker out.
 */
function seatedOnJoin(policy: RoomPolicy, request: Of<'member.join'>): boolean {
  if (request.maySpeak === false) return false;
  return policy.floorControl === 'open' || request.moderator;
}

/**
 * The same member joining again (a reconnect, or a second tab replacing the first) keeps its seat, hand and offer.
 * Name and moderator role come fresh from the join, as they would for a new member.
 */
function resume(draft: RoomDraft, existing: RoomMember, request: Of<'member.join'>): Decision {
  const closeConnectionId = existing.connectionId === request.connectionId ? null : existing.connectionId;
  const unchanged =
    closeConnectionId === null &&
    existing.presence === 'connected' &&
    existing.displayName === request.displayName &&
    existing.moderator === request.moderator;
  if (!unchanged) {
    draft.update(existing.memberId, {
      connectionId: request.connectionId,
      presence: 'connected',
      graceUntil: null,
      displayName: request.displayName,
      moderator: request.moderator,
    });
    draft.record({ kind: 'member.resumed', memberId: existing.memberId, closedConnectionId: closeConnectionId });
    if (!request.moderator && draft.sharer === existing.memberId && draft.policy.screenShare === 'owners') draft.stopScreen('no_longer_moderator');
  }
  return done(draft, { request: request.type, memberId: existing.memberId, resumed: true, closeConnectionId, seat: existing.seat });
}

/** A lost connection (see RoomDraft.drop); only the member's current one counts. */
function drop(draft: RoomDraft, request: Of<'member.drop'>): Decision {
  const member = draft.member(request.memberId);
  if (!member || member.connectionId !== request.connectionId || member.presence === 'dropped') {
    return done(draft, { request: request.type, memberId: request.memberId, dropped: false, graceUntil: member?.graceUntil ?? null });
  }
  const graceUntil = draft.drop(member.memberId, request.at);
  return done(draft, { request: request.type, memberId: member.memberId, dropped: true, graceUntil });
}

function hosting(draft: RoomDraft, request: Of<'room.hosting'>): Decision {
  const served = new Set(request.connectionIds);
  const lost = draft.connected.filter((m) => !served.has(m.connectionId));
  for (const m of lost) draft.drop(m.memberId, request.at);
  draft.hostUntil(request.at + request.ttlMs);
  const context = draft.result();
  return { ok: true, context, reply: { request: request.type, hostedUntil: context.hostedUntil ?? null, dropped: lost.length }, changes: draft.changes };
}

function takeFloor(draft: RoomDraft, self: RoomMember): Decision {
  if (self.seat !== null) return done(draft, { request: 'floor.take', memberId: self.memberId, seat: self.seat });
  const { floorControl } = draft.policy;
  if (floorControl === 'fixed' && !self.moderator) return refuse('floor_fixed', 'only moderators hold seats in this room');
  if (floorControl === 'moderated' && !self.moderator) return refuse('floor_moderated', 'a moderator must offer you a seat');
  const seat = draft.freeSeat();
  if (seat === null) return refuse('seats_full', 'every speaker seat is taken');
  draft.seat(self.memberId, seat, 'take');
  return done(draft, { request: 'floor.take', memberId: self.memberId, seat });
}

function revoke(draft: RoomDraft, self: RoomMember, request: Of<'speaker.revoke'>): Decision {
  if (!self.moderator) return refuse('not_moderator', 'only a moderator can revoke a seat');
  if (!draft.member(request.target)) return refuse('target_not_member', `${request.target} is not in this room`);
  draft.unseat(request.target, 'revoked');
  return done(draft, { request: request.type, target: request.target });
}

function offer(draft: RoomDraft, self: RoomMember, request: Of<'speaker.offer'>): Decision {
  if (draft.policy.floorControl === 'fixed') return refuse('floor_fixed', 'seats in this room are not offered');
  if (!self.moderator) return refuse('not_moderator', 'only a moderator can offer a seat');
  const target = draft.member(request.target);
  if (!target) return refuse('target_not_member', `${request.target} is not in this room`);
  if (target.seat !== null) return refuse('already_speaker', `${request.target} already holds a seat`);
  if (draft.offerFor(target.memberId)) return refuse('offer_pending', `${request.target} has a pending offer`);
  if (draft.freeSeat() === null) return refuse('seats_full', 'every speaker seat is taken');
  const expiresAt = request.at + OFFER_TTL_MS;
  draft.offer({ target: target.memberId, by: self.memberId, offeredAt: request.at, expiresAt });
  return done(draft, { request: request.type, target: target.memberId, expiresAt });
}

/** A failed accept (no seat free any more) keeps the offer: a seat may still free up before it expires. */
function accept(draft: RoomDraft, self: RoomMember): Decision {
  if (!draft.offerFor(self.memberId)) return refuse('no_offer', 'no speaker offer is pending for you');
  const seat = draft.freeSeat();
  if (seat === null) return refuse('seats_full', 'every speaker seat is taken');
  draft.closeOffer(self.memberId, 'accepted');
  draft.seat(self.memberId, seat, 'offer');
  return done(draft, { request: 'speaker.accept', memberId: self.memberId, seat });
}

/** Raising again keeps the original place: the queue is first raised, first served. */
function raiseHand(draft: RoomDraft, self: RoomMember, at: number): Decision {
  if (draft.policy.raiseHand === 'disabled') return refuse('raise_hand_disabled', 'this room has no raise hand');
  if (self.seat !== null) return refuse('already_speaker', 'you already hold a seat');
  if (draft.handPosition(self.memberId) === 0) draft.raiseHand(self.memberId, at);
  return done(draft, { request: 'hand.raise', memberId: self.memberId, position: draft.handPosition(self.memberId) });
}

function dismissHand(draft: RoomDraft, self: RoomMember, request: Of<'hand.dismiss'>): Decision {
  if (draft.policy.raiseHand === 'disabled') return refuse('raise_hand_disabled', 'this room has no raise hand');
  if (!self.moderator) return refuse('not_moderator', 'only a moderator can dismiss a hand');
  if (!draft.member(request.target)) return refuse('target_not_member', `${request.target} is not in this room`);
  draft.lowerHand(request.target, 'dismissed');
  return done(draft, { request: request.type, target: request.target });
}

function startScreen(draft: RoomDraft, self: RoomMember, at: number): Decision {
  const rule = draft.policy.screenShare;
  if (rule === 'disabled') return refuse('screen_disabled', 'screen sharing is disabled in this room');
  if (rule === 'owners' && !self.moderator) return refuse('not_moderator', 'only moderators share screens in this room');
  if (rule === 'speakers' && self.seat === null) return refuse('not_speaker', 'only speakers share screens in this room');
  const sharer = draft.sharer;
  if (sharer !== null && sharer !== self.memberId) return refuse('screen_busy', `${sharer} is sharing a screen`);
  if (sharer === null) draft.startScreen(self.memberId, at);
  return done(draft, { request: 'screen.start', memberId: self.memberId, screenProfile: draft.screenProfile });
}

function publishCheck(draft: RoomDraft, self: RoomMember, request: Of<'publish.check'>): Decision {
  const denial =
    request.source === 'microphone' ? (self.seat === null ? 'not_speaker' : null) : draft.sharer === self.memberId ? null : 'not_sharing';
  return done(draft, { request: request.type, memberId: self.memberId, source: request.source, allowed: denial === null, denial });
}

export interface DeadlineOutcome {
  readonly context: MediaRoomContext;
  readonly changes: readonly RoomChange[];
}

/**
 * A deadline from `mediaRoomTimers` fell due: a dropped member whose grace ended leaves, an unanswered offer expires.
 * Null when the deadline no longer holds (the member came back, the offer was answered): the host delivers timers
 * at least once, and a stale one must change nothing.
 */
export function deadlinePassed(context: MediaRoomContext, timer: MediaRoomTimerDue): DeadlineOutcome | null {
  if (context.policy === null) return null;
  const draft = new RoomDraft(context, context.policy);
  for (const m of context.members) {
    if (timer.name === graceTimer(m.memberId) && m.presence === 'dropped' && m.graceUntil !== null && timer.at >= m.graceUntil) {
      draft.remove(m.memberId, 'grace_expired');
    }
  }
  for (const o of context.offers) {
    if (timer.name === offerTimer(o.target) && timer.at >= o.expiresAt) draft.closeOffer(o.target, 'expired');
  }
  const hostedUntil = context.hostedUntil ?? null;
  if (timer.name === HOSTING_TIMER && hostedUntil !== null && timer.at >= hostedUntil) {
    for (const m of draft.connected) draft.drop(m.memberId, timer.at);
  }
  if (draft.changes.length === 0) return null;
  return { context: draft.result(), changes: draft.changes };
}
