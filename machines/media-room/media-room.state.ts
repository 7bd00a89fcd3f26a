import type { RoomChange } from './media-room.events.js';
import { DEFAULT_SCREEN_PROFILE, type RoomPolicy, type ScreenProfile } from './media-room.policy.js';

/**
 * What a room holds. Lists rather than records keyed by member id: they keep join and raise order, and an id
 * chosen by a client can never collide with an object's own properties.
 */
export interface RoomMember {
  readonly memberId: string;
  readonly displayName: string;
  readonly guest: boolean;
  readonly moderator: boolean;
  readonly connectionId: string;
  readonly joinedAt: number;
  /** The speaker seat held (0-based), or null for a listener. */
  readonly seat: number | null;
  readonly presence: 'connected' | 'dropped';
  /** While dropped: when the member is removed unless it joins again. */
  readonly graceUntil: number | null;
}

export interface RaisedHand {
  readonly memberId: string;
  readonly raisedAt: number;
}

export interface SpeakerOffer {
  readonly target: string;
  readonly by: string;
  readonly offeredAt: number;
  readonly expiresAt: number;
}

export interface ScreenShare {
  readonly memberId: string;
  readonly startedAt: number;
}

export interface MediaRoomContext {
  /** The actor key: `<environmentId>.<scope>`. */
  readonly roomId: string;
  readonly scope: string;
  /** Null until `room.open`. */
  readonly policy: RoomPolicy | null;
  /** In join order. */
  readonly members: readonly RoomMember[];
  /** In raise order: the first raised is first. */
  readonly hands: readonly RaisedHand[];
  /** At most one per target. */
  readonly offers: readonly SpeakerOffer[];
  readonly screen: ScreenShare | null;
  /** Grows by one with every change, so views and broadcasts can be ordered. */
  readonly revision: number;
  /**
   * While members are connected: until when their node vouches for their connections. Past it (the node died and
   * never renewed) they are dropped and their grace runs. Absent in rooms stored before it existed: read as null.
   */
  readonly hostedUntil?: number | null;
  /**
   * Since when nobody is in the room (ms); null while anyone is. The room's end for the actor host: a room empty for
   * ACTOR_ENDED_RETENTION_DAYS is retired, and its next `room.open` starts it afresh (revision 0), which an empty room
   * differs from only by its revision and policy, both of which the next open sets. Absent in rooms stored before it
   * existed: their emptiness counts from their next change.
   */
  readonly emptySince?: number | null;
}

export interface MediaRoomInput {
  readonly roomId: string;
  readonly scope: string;
}

/** How long a speaker offer waits for its answer. */
export const OFFER_TTL_MS = 60_000;
/** How long a node vouches for the connections it serves unless it says otherwise (`hostingTtlMs`). */
export const HOSTING_TTL_MS = 60_000;
export const HOSTING_TIMER = 'hosting';

export const graceTimer = (memberId: string): string => `grace:${memberId}`;
export const offerTimer = (memberId: string): string => `offer:${memberId}`;

export function emptyRoom(input: MediaRoomInput): MediaRoomContext {
  return { roomId: input.roomId, scope: input.scope, policy: null, members: [], hands: [], offers: [], screen: null, revision: 0, hostedUntil: null, emptySince: null };
}

/** `next` with its `emptySince` carried on from `previous`, set when it became empty at `at`, or cleared. */
export function withEmptiness(previous: MediaRoomContext, next: MediaRoomContext, at: number): MediaRoomContext {
  const emptySince = next.members.length > 0 ? null : previous.members.length === 0 ? (previous.emptySince ?? at) : at;
  return (next.emptySince ?? null) === emptySince ? next : { ...next, emptySince };
}

/** The room's durable deadlines, for the actor kind's `timers`. */
export function mediaRoomTimers(context: MediaRoomContext): Record<string, number> {
  const timers: Record<string, number> = {};
  for (const m of context.members) if (m.graceUntil !== null) timers[graceTimer(m.memberId)] = m.graceUntil;
  for (const o of context.offers) timers[offerTimer(o.target)] = o.expiresAt;
  if (context.hostedUntil != null) timers[HOSTING_TIMER] = context.hostedUntil;
  return timers;
}

/**
 * One transition's working copy of an open room: the edits a rule makes, each recording the change members must
 * learn about, and the consequences that follow from it (a seat taken lowers the hand and withdraws the offer; a seat
 * lost in a `speakers` room ends the share). Lives only inside one pure transition.
 */
export class RoomDraft {
  readonly policy: RoomPolicy;
  readonly changes: RoomChange[] = [];
  #members: RoomMember[];
  #hands: RaisedHand[];
  #offers: SpeakerOffer[];
  #screen: ScreenShare | null;
  #hostedUntil: number | null;
  readonly #base: MediaRoomContext;

  constructor(base: MediaRoomContext, policy: RoomPolicy) {
    this.#base = base;
    this.policy = policy;
    this.#members = [...base.members];
    this.#hands = [...base.hands];
    this.#offers = [...base.offers];
    this.#screen = base.screen;
    this.#hostedUntil = base.hostedUntil ?? null;
  }

  get connected(): readonly RoomMember[] {
    return this.#members.filter((m) => m.presence === 'connected');
  }

  /** The connected members' node vouches for them until `until`; not a change members see (no revision). */
  hostUntil(until: number): void {
    this.#hostedUntil = until;
  }

  /**
   * The member's connection is gone: it keeps seat, hand and offer until the grace ends, but not its screen share (the
   * share's media went with the connection, and holding the one sharer slot for an absent member would block others).
   */
  drop(memberId: string, at: number): number {
    const member = this.member(memberId)!;
    const graceUntil = at + this.policy.reconnectGraceSeconds * 1000;
    this.update(memberId, { presence: 'dropped', graceUntil });
    if (this.sharer === memberId) this.stopScreen('dropped');
    this.record({ kind: 'member.dropped', memberId, connectionId: member.connectionId, graceUntil });
    return graceUntil;
  }

  member(memberId: string): RoomMember | undefined {
    return this.#members.find((m) => m.memberId === memberId);
  }
  get memberCount(): number {
    return this.#members.length;
  }
  get sharer(): string | null {
    return this.#screen?.memberId ?? null;
  }
  offerFor(target: string): SpeakerOffer | undefined {
    return this.#offers.find((o) => o.target === target);
  }
  /** 1-based place in the hand queue, or 0 when the hand is down. */
  handPosition(memberId: string): number {
    return this.#hands.findIndex((h) => h.memberId === memberId) + 1;
  }
  /** The lowest free seat, or null when every seat is held (dropped members keep theirs). */
  freeSeat(): number | null {
    const taken = new Set(this.#members.map((m) => m.seat));
    for (let seat = 0; seat < this.policy.maxSpeakerSeats; seat++) if (!taken.has(seat)) return seat;
    return null;
  }

  record(change: RoomChange): void {
    this.changes.push(change);
  }

  add(member: RoomMember): void {
    this.#members.push(member);
  }

  update(memberId: string, patch: Partial<Omit<RoomMember, 'memberId'>>): RoomMember {
    const i = this.#members.findIndex((m) => m.memberId === memberId);
    if (i < 0) throw new Error(`media room: no member ${memberId} to update`);
    const updated = { ...this.#members[i]!, ...patch };
    this.#members[i] = updated;
    return updated;
  }

  /** Seats the member on `seat` (which must be free): its hand goes down and an offer to it is withdrawn. */
  seat(memberId: string, seat: number, via: 'join' | 'take' | 'offer'): void {
    this.update(memberId, { seat });
    this.record({ kind: 'seat.taken', memberId, seat, via });
    this.lowerHand(memberId, 'seated');
    this.closeOffer(memberId, 'withdrawn');
  }

  unseat(memberId: string, reason: 'released' | 'revoked' | 'left'): void {
    const seat = this.member(memberId)?.seat;
    if (seat === null || seat === undefined) return;
    this.update(memberId, { seat: null });
    if (this.sharer === memberId && this.policy.screenShare === 'speakers') this.stopScreen('seat_lost');
    this.record({ kind: 'seat.freed', memberId, seat, reason });
  }

  raiseHand(memberId: string, at: number): void {
    this.#hands.push({ memberId, raisedAt: at });
    this.record({ kind: 'hand.raised', memberId, raisedAt: at });
  }

  lowerHand(memberId: string, reason: 'lowered' | 'dismissed' | 'seated' | 'left'): void {
    const i = this.#hands.findIndex((h) => h.memberId === memberId);
    if (i < 0) return;
    this.#hands.splice(i, 1);
    this.record({ kind: 'hand.lowered', memberId, reason });
  }

  offer(offer: SpeakerOffer): void {
    this.#offers.push(offer);
    this.record({ kind: 'offer.made', target: offer.target, by: offer.by, expiresAt: offer.expiresAt });
  }

  closeOffer(target: string, reason: 'accepted' | 'declined' | 'expired' | 'withdrawn'): void {
    const i = this.#offers.findIndex((o) => o.target === target);
    if (i < 0) return;
    this.#offers.splice(i, 1);
    this.record({ kind: 'offer.closed', target, reason });
  }

  startScreen(memberId: string, at: number): void {
    this.#screen = { memberId, startedAt: at };
    this.record({ kind: 'screen.started', memberId, screenProfile: this.screenProfile });
  }

  stopScreen(reason: 'stopped' | 'seat_lost' | 'no_longer_moderator' | 'dropped' | 'left'): void {
    if (!this.#screen) return;
    this.record({ kind: 'screen.stopped', memberId: this.#screen.memberId, reason });
    this.#screen = null;
  }

  get screenProfile(): ScreenProfile {
    return this.policy.screenProfile ?? DEFAULT_SCREEN_PROFILE;
  }

  /** Takes the member out of the room with everything it held. */
  remove(memberId: string, reason: 'left' | 'grace_expired'): void {
    const member = this.member(memberId);
    if (!member) return;
    if (this.sharer === memberId) this.stopScreen('left');
    this.unseat(memberId, 'left');
    this.lowerHand(memberId, 'left');
    this.closeOffer(memberId, 'withdrawn');
    this.#members = this.#members.filter((m) => m.memberId !== memberId);
    this.record({ kind: 'member.left', memberId, connectionId: member.connectionId, reason });
  }

  /** The room after the edits; the revision grows only when members saw something change. */
  result(): MediaRoomContext {
    // Nobody connected, nothing to vouch for: the hosting deadline goes with the last connection.
    const hostedUntil = this.#members.some((m) => m.presence === 'connected') ? this.#hostedUntil : null;
    if (this.changes.length === 0 && hostedUntil === (this.#base.hostedUntil ?? null)) return this.#base;
    return {
      ...this.#base,
      members: this.#members,
      hands: this.#hands,
      offers: this.#offers,
      screen: this.#screen,
      revision: this.#base.revision + (this.changes.length > 0 ? 1 : 0),
      hostedUntil,
    };
  }
}
