/**
 * What one room allows: a configured space's policy or the Environment's direct-call policy (media-plugin.md,
 * "Installation configuration"). The config's Zod schemas validate each field; `policyProblem` adds the cross-field
 * rules this room depends on, because a room keeps its policy durably and must never hold one it cannot honour.
 */
export type RoomMode = 'direct_call' | 'meeting' | 'stage';
export type FloorControl = 'fixed' | 'moderated' | 'open';
export type ScreenShareRule = 'disabled' | 'owners' | 'speakers';
export type ScreenProfile = 'slides' | 'motion';
export type GuestPolicy = 'account_required' | 'allowed' | 'callee_only';

export interface RoomPolicy {
  readonly mode: RoomMode;
  readonly maxParticipants: number;
  readonly maxSpeakerSeats: number;
  readonly floorControl: FloorControl;
  readonly raiseHand: 'disabled' | 'enabled';
  readonly screenShare: ScreenShareRule;
  readonly screenProfile?: ScreenProfile;
  readonly guestPolicy: GuestPolicy;
  readonly encryption: 'transport' | 'sfu_blind';
  readonly spatialAudio?: 'disabled' | 'distance_attenuation';
  readonly roleAuthorityUrl?: string;
  readonly reconnectGraceSeconds: number;
}

/** The encoding hint a screen share gets when the policy names none. */
export const DEFAULT_SCREEN_PROFILE: ScreenProfile = 'slides';

const POLICY_FIELDS: readonly (keyof RoomPolicy)[] = [
  'mode',
  'maxParticipants',
  'maxSpeakerSeats',
  'floorControl',
  'raiseHand',
  'screenShare',
  'screenProfile',
  'guestPolicy',
  'encryption',
  'spatialAudio',
  'roleAuthorityUrl',
  'reconnectGraceSeconds',
];

/** Field by field; an absent optional field equals an undefined one (a stored snapshot drops undefined). */
export function samePolicy(a: RoomPolicy, b: RoomPolicy): boolean {
  return POLICY_FIELDS.every((field) => a[field] === b[field]);
}

const within = (n: number, min: number, max: number): boolean => Number.isInteger(n) && n >= min && n <= max;

/** Why this policy cannot run a room, or null when it can. */
export function policyProblem(p: RoomPolicy): string | null {
  if (!within(p.reconnectGraceSeconds, 5, 120)) return 'reconnectGraceSeconds must be an integer from 5 to 120';
  if (p.mode === 'direct_call') {
    const fixed =
      p.maxParticipants === 2 &&
      p.maxSpeakerSeats === 2 &&
      p.floorControl === 'open' &&
      p.raiseHand === 'disabled' &&
      p.screenShare === 'disabled' &&
      p.encryption === 'sfu_blind' &&
      (p.spatialAudio ?? 'disabled') === 'disabled' &&
      p.screenProfile === undefined;
    if (!fixed) return 'a direct call is 2 participants on 2 open seats, end-to-end encrypted, without hands or screen share';
    if (p.guestPolicy === 'allowed') return 'a direct call admits guests only as the callee (callee_only)';
    return null;
  }
  if (!within(p.maxParticipants, 2, 150)) return 'maxParticipants must be an integer from 2 to 150';
  if (!within(p.maxSpeakerSeats, 1, 16)) return 'maxSpeakerSeats must be an integer from 1 to 16';
  if (p.guestPolicy === 'callee_only') return 'callee_only applies to direct calls only';
  return null;
}
