import type { RoomView } from '../../media/control/media-control.messages.js';
import { DEFAULT_SCREEN_PROFILE } from './media-room.policy.js';
import type { MediaRoomContext } from './media-room.state.js';

/**
 * The room as its members see it: the `room` of the control protocol's `room.state` message, built from the context
 * alone, so the control plane broadcasts the snapshot of the reply it already holds. Null before the room opens (there
 * is nobody to show it to). Moderators appear with role `moderator` whether seated or not (`seated` tells); the
 * policy's `roleAuthorityUrl` and guest rule are the server's business and stay out.
 */
export function mediaRoomView(context: MediaRoomContext): RoomView | null {
  const { policy } = context;
  if (policy === null) return null;
  const iso = (ms: number): string => new Date(ms).toISOString();
  const raisedAt = new Map(context.hands.map((h) => [h.memberId, h.raisedAt]));
  return {
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
    members: context.members.map((m) => {
      const handRaisedAt = raisedAt.get(m.memberId);
      return {
        memberId: m.memberId,
        displayName: m.displayName,
        role: m.moderator ? 'moderator' : m.seat !== null ? 'speaker' : 'listener',
        seated: m.seat !== null,
        connection: m.presence,
        graceUntil: m.graceUntil === null ? null : iso(m.graceUntil),
        handRaisedAt: handRaisedAt === undefined ? null : iso(handRaisedAt),
      };
    }),
    handQueue: context.hands.map((h) => h.memberId),
    offers: context.offers.map((o) => ({ target: o.target, by: o.by, expiresAt: iso(o.expiresAt) })),
    screenSharer: context.screen?.memberId ?? null,
  };
}
