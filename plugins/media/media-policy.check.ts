import { backendEndpoint } from '../../runtime/backend-grants.js';
import type { MediaEnvironmentConfigV2, MediaRoomPolicyV2, MediaSpacePolicyV2 } from './media-config.schema.js';

/**
 * The Media service's cross-field policy check: what the structural schema (which is all the registry checks) cannot
 * say because it is about combinations. The spec leaves these rules to the service ("not shown"); these are ours. Each
 * rule refuses a policy that is contradictory (a setting another one makes meaningless or impossible) or unsafe.
 * Input is a configuration that already satisfies MediaEnvironmentConfigV2Schema.
 *
 * | code                                    | field            | refused when                                       | why |
 * |-----------------------------------------|------------------|----------------------------------------------------|-----|
 * | speaker_seats_exceed_participants       | maxSpeakerSeats  | maxSpeakerSeats > maxParticipants                  | seats no one could ever fill |
 * | meeting_too_large                       | maxParticipants  | meeting with maxParticipants > 16                  | everyone in a meeting may speak; 16 is the seat ceiling, so larger rooms are stages |
 * | stage_without_audience                  | maxSpeakerSeats  | stage with maxSpeakerSeats ≥ maxParticipants       | a stage where everyone holds a seat is a meeting |
 * | stage_open_floor                        | floorControl     | stage with floorControl open                       | up to 150 listeners could take the microphone unasked |
 * | raise_hand_on_fixed_floor               | raiseHand        | raiseHand enabled, floorControl fixed              | nobody can grant a hand: the seats never change |
 * | raise_hand_on_open_floor                | raiseHand        | raiseHand enabled, floorControl open               | nobody answers a hand: anyone takes a free seat |
 * | fixed_floor_without_authority           | roleAuthorityUrl | floorControl fixed, no roleAuthorityUrl            | a fixed floor's speakers can only be those the Environment names through the callback |
 * | screen_profile_without_screen_share     | screenProfile    | screenProfile set, screenShare disabled            | a profile for screens nobody may share |
 * | spatial_audio_needs_transport_encryption| spatialAudio     | distance_attenuation with encryption sfu_blind     | the media server cannot read sfu_blind audio, so it cannot attenuate it |
 * | role_authority_url_invalid              | roleAuthorityUrl | backendEndpoint() refuses it (spaces, direct calls)| https only (http on loopback), no credentials, no fragment, canonical form |
 * | space_id_duplicate                      | spaces[].id      | two spaces share an id                             | a space is addressed by its id |
 *
 * Deliberately allowed: a moderated floor without raise hand (moderators invite speakers with speaker offers), guests
 * on an open meeting floor (the usual "anyone with the link" meeting; the Environment chose `allowed`), direct calls
 * turned off with a policy kept for later.
 */

export type MediaPolicyViolationCode =
  | 'speaker_seats_exceed_participants'
  | 'meeting_too_large'
  | 'stage_without_audience'
  | 'stage_open_floor'
  | 'raise_hand_on_fixed_floor'
  | 'raise_hand_on_open_floor'
  | 'fixed_floor_without_authority'
  | 'screen_profile_without_screen_share'
  | 'spatial_audio_needs_transport_encryption'
  | 'role_authority_url_invalid'
  | 'space_id_duplicate';

export interface MediaPolicyViolation {
  /** JSON Pointer into the configuration document. */
  readonly pointer: string;
  readonly code: MediaPolicyViolationCode;
  readonly message: string;
}

/** Every participant of a meeting may speak, so a meeting is no larger than the most speaker seats a space has. */
export const MEDIA_MEETING_MAX_PARTICIPANTS = 16;

interface Rule<P> {
  readonly code: MediaPolicyViolationCode;
  readonly field: keyof P & string;
  readonly violated: (policy: P) => boolean;
  readonly message: (policy: P) => string;
}

const roomRules: readonly Rule<MediaRoomPolicyV2>[] = [
  {
    code: 'role_authority_url_invalid',
    field: 'roleAuthorityUrl',
    violated: (p) => p.roleAuthorityUrl !== undefined && backendEndpoint(p.roleAuthorityUrl) === undefined,
    message: () => 'must be an https URL (http only on loopback) in canonical form, with no credentials and no fragment',
  },
];

const spaceRules: readonly Rule<MediaSpacePolicyV2>[] = [
  {
    code: 'speaker_seats_exceed_participants',
    field: 'maxSpeakerSeats',
    violated: (p) => p.maxSpeakerSeats > p.maxParticipants,
    message: (p) => `${p.maxSpeakerSeats} speaker seats in a space of at most ${p.maxParticipants} participants`,
  },
  {
    code: 'meeting_too_large',
    field: 'maxParticipants',
    violated: (p) => p.mode === 'meeting' && p.maxParticipants > MEDIA_MEETING_MAX_PARTICIPANTS,
    message: (p) => `a meeting holds at most ${MEDIA_MEETING_MAX_PARTICIPANTS} participants (not ${p.maxParticipants}): use a stage for larger audiences`,
  },
  {
    code: 'stage_without_audience',
    field: 'maxSpeakerSeats',
    violated: (p) => p.mode === 'stage' && p.maxSpeakerSeats >= p.maxParticipants,
    message: () => 'a stage has fewer speaker seats than participants: one where everyone speaks is a meeting',
  },
  {
    code: 'stage_open_floor',
    field: 'floorControl',
    violated: (p) => p.mode === 'stage' && p.floorControl === 'open',
    message: () => 'a stage floor is fixed or moderated: on an open floor any listener could take the microphone',
  },
  {
    code: 'raise_hand_on_fixed_floor',
    field: 'raiseHand',
    violated: (p) => p.raiseHand === 'enabled' && p.floorControl === 'fixed',
    message: () => 'a raised hand cannot be granted on a fixed floor: disable raiseHand or moderate the floor',
  },
  {
    code: 'raise_hand_on_open_floor',
    field: 'raiseHand',
    violated: (p) => p.raiseHand === 'enabled' && p.floorControl === 'open',
    message: () => 'on an open floor anyone takes a free seat, so nobody answers a raised hand: disable raiseHand or moderate the floor',
  },
  {
    code: 'fixed_floor_without_authority',
    field: 'roleAuthorityUrl',
    violated: (p) => p.floorControl === 'fixed' && p.roleAuthorityUrl === undefined,
    message: () => 'a fixed floor needs roleAuthorityUrl: its speakers are the ones the Environment backend allows to publish',
  },
  {
    code: 'screen_profile_without_screen_share',
    field: 'screenProfile',
    violated: (p) => p.screenProfile !== undefined && p.screenShare === 'disabled',
    message: () => 'screenProfile applies only when screenShare is not disabled',
  },
  {
    code: 'spatial_audio_needs_transport_encryption',
    field: 'spatialAudio',
    violated: (p) => p.spatialAudio === 'distance_attenuation' && p.encryption === 'sfu_blind',
    message: () => 'distance attenuation needs encryption transport: the media server cannot read sfu_blind audio',
  },
];

function apply<P>(rules: readonly Rule<P>[], policy: P, at: string): MediaPolicyViolation[] {
  return rules.filter((rule) => rule.violated(policy)).map((rule) => ({ pointer: `${at}/${rule.field}`, code: rule.code, message: rule.message(policy) }));
}

/** The violations of one space policy; `at` is the policy's pointer in the document. */
export function checkMediaSpacePolicy(policy: MediaSpacePolicyV2, at = ''): MediaPolicyViolation[] {
  return [...apply(spaceRules, policy, at), ...apply(roomRules, policy, at)];
}

/** The violations of a whole installation configuration, in document order; empty when the service accepts it. */
export function checkMediaEnvironmentConfig(config: MediaEnvironmentConfigV2): MediaPolicyViolation[] {
  const violations: MediaPolicyViolation[] = [];
  const firstIndex = new Map<string, number>();
  (config.spaces ?? []).forEach((space, i) => {
    const first = firstIndex.get(space.id);
    if (first === undefined) firstIndex.set(space.id, i);
    else violations.push({ pointer: `/spaces/${i}/id`, code: 'space_id_duplicate', message: `space ${space.id} is already defined at /spaces/${first}` });
    violations.push(...checkMediaSpacePolicy(space.policy, `/spaces/${i}/policy`));
  });
  if (config.directCalls.policy) violations.push(...apply(roomRules, config.directCalls.policy, '/directCalls/policy'));
  return violations;
}
