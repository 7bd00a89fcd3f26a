import { DISPLAY_NAME_MAX_LENGTH, roomView, type RoomView } from '../../media/control/media-control.messages.js';
import { DEFAULT_SCREEN_PROFILE } from './media-room.policy.js';
import type { MediaRoomContext } from './media-room.state.js';

/**
 * The room as its members see it: the whole view the control protocol's `room.state` pages carry, built from the
 * context alone, so the control plane broadcasts the snapshot of the reply it already holds. Each member says its own
 * place in the raise-hand queue and the offer made to it, so the view splits into pages of members. Null before the
 * room opens (there is nobody to show it to). Moderators appear with role `moderator` whether seated or not (`seated`
 * tells); the policy's `roleAuthorityUrl` and guest rule are the server's business and stay out.
 */
export function mediaRoomView(context: MediaRoomContext): RoomView | null {
  const { policy } = context;
  if (policy === null) return null;
  const iso = (ms: number): string => new Date(ms).toISOString();
  const hands = new Map(context.hands.map((h, i) => [h.memberId, { raisedAt: h.raisedAt, position: i + 1 }]));
  const offers = new Map(context.offers.map((o) => [o.target, o]));
  const header = {
    roomId: context.roomId,
    scope: context.scope,
    revision: context.revision,
    mode: policy.mode,
    policy: {
      maxParticipants: policy.maxParticipants,
      maxSpeakerSeats: policy.maxSpeakerSeats,
      floorControl: policy.floorControl,
      raiseHand: policy.raiseHand,
      screenShare: policy.screenShare,
      screenProfile: policy.screenProfile ?? DEFAULT_SCREEN_PROFILE,
      encryption: policy.encryption,
      reconnectGraceSeconds: policy.reconnectGraceSeconds,
    },
    screenSharer: context.screen?.memberId ?? null,
  } as const;
  const members = context.members.map((m) => {
    const hand = hands.get(m.memberId);
    const offer = offers.get(m.memberId);
    return {
      memberId: m.memberId,
      displayName: m.displayName.slice(0, DISPLAY_NAME_MAX_LENGTH),
      role: m.moderator ? 'moderator' : m.seat !== null ? 'speaker' : 'listener',
      seated: m.seat !== null,
      connection: m.presence,
      graceUntil: m.graceUntil === null ? null : iso(m.graceUntil),
      handRaisedAt: hand === undefined ? null : iso(hand.raisedAt),
      handPosition: hand === undefined ? null : hand.position,
      offer: offer === undefined ? null : { by: offer.by, expiresAt: iso(offer.expiresAt) },
    } as const;
  });
  return roomView(header, members);
}
