import type { RoomPolicy, ScreenProfile } from './media-room.policy.js';

/**
 * The media room actor's protocol. The control plane sends one request per client request (the acting member is
 * always `memberId`; a moderator's subject is `target`) and reads exactly one `room.reply` or `room.refused` back.
 * A request that changed the room also emits one `room.changed` with the new `revision` and what changed, so the
 * control plane can broadcast the view and close media that lost its right to flow.
 */
export type PublishSource = 'microphone' | 'screen';

export type MediaRoomRequest =
  | { readonly type: 'room.open'; readonly policy: RoomPolicy; readonly at: number }
  | {
      readonly type: 'member.join';
      readonly memberId: string;
      readonly displayName: string;
      /** Signed in without an account. */
      readonly guest: boolean;
      /** Holds the Environment admin role. */
      readonly moderator: boolean;
      /**
       * The joining grant may take the floor (scope `media:request-speak`): only then is a seat free for it taken on
       * join, as `floor.take` would refuse it. Absent in joins journaled before the rule, which were seated by floor
       * and role alone; a replay must decide as they were decided.
       */
      readonly maySpeak?: boolean;
      readonly connectionId: string;
      /** How long the joining connection's node vouches for it before renewing (`room.hosting`); default HOSTING_TTL_MS. */
      readonly hostingTtlMs?: number;
      readonly at: number;
    }
  /**
   * From the node serving the room's connections, naming those it serves or is admitting: the connected members on
   * them stay vouched for another `ttlMs`; those on any other lost their connection without the node recording it (a
   * drop that failed, or a crash: a node that has just opened the room names none) and are dropped, with their grace.
   */
  | { readonly type: 'room.hosting'; readonly ttlMs: number; readonly connectionIds: readonly string[]; readonly at: number }
  | { readonly type: 'member.leave'; readonly memberId: string; readonly at: number }
  /** The member's connection `connectionId` was lost (not a request of the member: the socket closed). */
  | { readonly type: 'member.drop'; readonly memberId: string; readonly connectionId: string; readonly at: number }
  | { readonly type: 'floor.take'; readonly memberId: string; readonly at: number }
  | { readonly type: 'floor.release'; readonly memberId: string; readonly at: number }
  | { readonly type: 'speaker.revoke'; readonly memberId: string; readonly target: string; readonly at: number }
  | { readonly type: 'speaker.offer'; readonly memberId: string; readonly target: string; readonly at: number }
  | { readonly type: 'speaker.accept'; readonly memberId: string; readonly at: number }
  | { readonly type: 'speaker.decline'; readonly memberId: string; readonly at: number }
  | { readonly type: 'hand.raise'; readonly memberId: string; readonly at: number }
  | { readonly type: 'hand.lower'; readonly memberId: string; readonly at: number }
  | { readonly type: 'hand.dismiss'; readonly memberId: string; readonly target: string; readonly at: number }
  | { readonly type: 'screen.start'; readonly memberId: string; readonly at: number }
  | { readonly type: 'screen.stop'; readonly memberId: string; readonly at: number }
  /** A read: may this member publish this source right now? Changes nothing. */
  | { readonly type: 'publish.check'; readonly memberId: string; readonly source: PublishSource; readonly at: number };

export type MediaRoomRequestType = MediaRoomRequest['type'];

/**
 * Durable deadlines `grace:<memberId>`, `offer:<memberId>` and `hosting` (the connected members' node stopped renewing:
 * all of them are dropped) falling due (sent by the host).
 */
export interface MediaRoomTimerDue {
  readonly type: 'timer.due';
  readonly name: string;
  readonly dueAt: number;
  readonly at: number;
}

export type MediaRoomEvent = MediaRoomRequest | MediaRoomTimerDue;

export type MediaRoomRefusalCode =
  | 'room_not_open'
  | 'policy_invalid'
  | 'policy_changed'
  | 'not_member'
  | 'target_not_member'
  | 'room_full'
  | 'guest_not_allowed'
  | 'not_moderator'
  | 'not_speaker'
  | 'already_speaker'
  | 'floor_fixed'
  | 'floor_moderated'
  | 'seats_full'
  | 'raise_hand_disabled'
  | 'offer_pending'
  | 'no_offer'
  | 'screen_disabled'
  | 'screen_busy';

/** Why publishing a source is not allowed now (a `publish.check` answer, not a refusal). */
export type PublishDenial = 'not_speaker' | 'not_sharing';

/** What each accepted request answers, besides `type`, `request` and `revision`. */
export interface ReplyFields {
  'room.open': Record<never, never>;
  /** `dropped`: connected members on connections the node does not serve, taken as disconnected. */
  'room.hosting': { hostedUntil: number | null; dropped: number };
  /**
   * `resumed`: the member was already here (connected or inside its grace) and keeps seat, role and hand.
   * `closeConnectionId`: the member's previous connection, to be closed (null when there was none or it is the same).
   */
  'member.join': { memberId: string; resumed: boolean; closeConnectionId: string | null; seat: number | null };
  'member.leave': { memberId: string };
  /** `dropped` is false when the connection was not the member's current one (or it was no member): nothing changed. */
  'member.drop': { memberId: string; dropped: boolean; graceUntil: number | null };
  'floor.take': { memberId: string; seat: number };
  'floor.release': { memberId: string };
  'speaker.revoke': { target: string };
  'speaker.offer': { target: string; expiresAt: number };
  'speaker.accept': { memberId: string; seat: number };
  'speaker.decline': { memberId: string };
  /** `position` is 1 for the first hand in the queue. */
  'hand.raise': { memberId: string; position: number };
  'hand.lower': { memberId: string };
  'hand.dismiss': { target: string };
  'screen.start': { memberId: string; screenProfile: ScreenProfile };
  'screen.stop': { memberId: string };
  'publish.check': { memberId: string; source: PublishSource; allowed: boolean; denial: PublishDenial | null };
}

export type MediaRoomReplyBody = { [R in MediaRoomRequestType]: { readonly request: R } & Readonly<ReplyFields[R]> }[MediaRoomRequestType];

/** One fact of a change, in the order it happened. */
export type RoomChange =
  | { readonly kind: 'policy.set' }
  | { readonly kind: 'member.joined'; readonly memberId: string }
  /** `closedConnectionId`: the connection the resume replaced (to be closed), null when it was the same one. */
  | { readonly kind: 'member.resumed'; readonly memberId: string; readonly closedConnectionId: string | null }
  | { readonly kind: 'member.dropped'; readonly memberId: string; readonly connectionId: string; readonly graceUntil: number }
  | { readonly kind: 'member.left'; readonly memberId: string; readonly connectionId: string; readonly reason: 'left' | 'grace_expired' }
  | { readonly kind: 'seat.taken'; readonly memberId: string; readonly seat: number; readonly via: 'join' | 'take' | 'offer' }
  /** The member's microphone must stop flowing. */
  | { readonly kind: 'seat.freed'; readonly memberId: string; readonly seat: number; readonly reason: 'released' | 'revoked' | 'left' }
  | { readonly kind: 'hand.raised'; readonly memberId: string; readonly raisedAt: number }
  | { readonly kind: 'hand.lowered'; readonly memberId: string; readonly reason: 'lowered' | 'dismissed' | 'seated' | 'left' }
  | { readonly kind: 'offer.made'; readonly target: string; readonly by: string; readonly expiresAt: number }
  /** `withdrawn`: the target left or got a seat another way. */
  | { readonly kind: 'offer.closed'; readonly target: string; readonly reason: 'accepted' | 'declined' | 'expired' | 'withdrawn' }
  | { readonly kind: 'screen.started'; readonly memberId: string; readonly screenProfile: ScreenProfile }
  /** The member's screen must stop flowing. */
  | {
      readonly kind: 'screen.stopped';
      readonly memberId: string;
      readonly reason: 'stopped' | 'seat_lost' | 'no_longer_moderator' | 'dropped' | 'left';
    };

export type MediaRoomEmitted =
  | ({ readonly type: 'room.reply'; readonly revision: number } & MediaRoomReplyBody)
  | {
      readonly type: 'room.refused';
      readonly request: MediaRoomRequestType;
      readonly code: MediaRoomRefusalCode;
      readonly message: string;
    }
  | { readonly type: 'room.changed'; readonly revision: number; readonly changes: readonly RoomChange[] };

export type MediaRoomReply = Extract<MediaRoomEmitted, { type: 'room.reply' }>;
export type MediaRoomRefusal = Extract<MediaRoomEmitted, { type: 'room.refused' }>;
export type MediaRoomChanged = Extract<MediaRoomEmitted, { type: 'room.changed' }>;
