import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_DIRECT_CALL_POLICY } from '../../media/media.feature.js';
import { MediaEnvironmentConfigV2Schema, type MediaEnvironmentConfigV2, type MediaSpacePolicyV2 } from '../../plugins/media/media-config.schema.js';
import { checkMediaEnvironmentConfig, checkMediaSpacePolicy, type MediaPolicyViolationCode } from '../../plugins/media/media-policy.check.js';

/**
 * The Media service's cross-field rules, one test per rule: each refused combination names its code and pointer, and
 * the nearest accepted neighbour passes (so a rule refuses what it says and no more). Every policy used here first
 * passes the structural schema: the check only ever sees configurations the registry accepted.
 */
const meeting: MediaSpacePolicyV2 = {
  mode: 'meeting',
  maxParticipants: 12,
  maxSpeakerSeats: 12,
  floorControl: 'open',
  raiseHand: 'disabled',
  screenShare: 'speakers',
  screenProfile: 'slides',
  guestPolicy: 'account_required',
  encryption: 'sfu_blind',
  reconnectGraceSeconds: 30,
};

const stage: MediaSpacePolicyV2 = {
  mode: 'stage',
  maxParticipants: 150,
  maxSpeakerSeats: 4,
  floorControl: 'moderated',
  raiseHand: 'enabled',
  screenShare: 'owners',
  guestPolicy: 'allowed',
  encryption: 'transport',
  spatialAudio: 'distance_attenuation',
  roleAuthorityUrl: 'https://backend.stage-world.test/media/authority',
  reconnectGraceSeconds: 60,
};

function codes(policy: MediaSpacePolicyV2): MediaPolicyViolationCode[] {
  const config: MediaEnvironmentConfigV2 = { spaces: [{ id: 'room', policy }], directCalls: { enabled: false } };
  assert.ok(MediaEnvironmentConfigV2Schema.safeParse(config).success, 'structurally valid');
  return checkMediaSpacePolicy(policy).map((v) => v.code);
}

test('well-formed meetings and stages pass', () => {
  assert.equal(codes(meeting), []);
  assert.equal(codes(stage), []);
  assert.equal(codes({ ...stage, floorControl: 'moderated', raiseHand: 'disabled' }), [], 'a moderated floor may be invite-only');
  assert.equal(codes({ ...meeting, guestPolicy: 'allowed' }), [], 'guests on an open meeting floor are the Environment\'s choice');
});

test('speaker_seats_exceed_participants: no more seats than participants', () => {
  assert.equal(checkMediaSpacePolicy({ ...meeting, maxParticipants: 4, maxSpeakerSeats: 5 }, '/spaces/0/policy'), [
    { pointer: '/spaces/0/policy/maxSpeakerSeats', code: 'speaker_seats_exceed_participants', message: '5 speaker seats in a space of at most 4 participants' },
  ]);
  assert.equal(codes({ ...meeting, maxParticipants: 5, maxSpeakerSeats: 5 }), []);
});

test('meeting_too_large: a meeting holds at most 16 participants', () => {
  assert.equal(codes({ ...meeting, maxParticipants: 17 }), ['meeting_too_large']);
  assert.equal(codes({ ...meeting, maxParticipants: 16 }), []);
  assert.equal(codes({ ...stage, maxParticipants: 17 }), [], 'stages are the large rooms');
});

test('stage_without_audience: a stage keeps fewer seats than participants', () => {
  assert.equal(codes({ ...stage, maxParticipants: 4, maxSpeakerSeats: 4 }), ['stage_without_audience']);
  assert.equal(codes({ ...stage, maxParticipants: 5, maxSpeakerSeats: 4 }), []);
});

test('stage_open_floor: a stage floor is fixed or moderated', () => {
  assert.equal(codes({ ...stage, floorControl: 'open', raiseHand: 'disabled' }), ['stage_open_floor']);
  assert.equal(codes({ ...stage, floorControl: 'fixed', raiseHand: 'disabled' }), []);
});

test('raise_hand_on_fixed_floor and raise_hand_on_open_floor: a hand needs a moderator to answer it', () => {
  assert.equal(checkMediaSpacePolicy({ ...stage, floorControl: 'fixed' }).map((v) => [v.pointer, v.code]), [['/raiseHand', 'raise_hand_on_fixed_floor']]);
  assert.equal(checkMediaSpacePolicy({ ...meeting, raiseHand: 'enabled' }).map((v) => [v.pointer, v.code]), [['/raiseHand', 'raise_hand_on_open_floor']]);
  assert.equal(codes({ ...meeting, floorControl: 'moderated', raiseHand: 'enabled' }), []);
});

test('fixed_floor_without_authority: a fixed floor needs the Environment\'s callback', () => {
  const { roleAuthorityUrl: _, ...withoutAuthority } = stage;
  assert.equal(codes({ ...withoutAuthority, floorControl: 'fixed', raiseHand: 'disabled' }), ['fixed_floor_without_authority']);
  assert.equal(codes({ ...withoutAuthority, floorControl: 'moderated' }), [], 'a moderated floor has moderators instead');
});

test('screen_profile_without_screen_share: a profile only where screens may be shared', () => {
  assert.equal(checkMediaSpacePolicy({ ...meeting, screenShare: 'disabled' }).map((v) => [v.pointer, v.code]), [['/screenProfile', 'screen_profile_without_screen_share']]);
  const { screenProfile: _, ...noProfile } = meeting;
  assert.equal(codes({ ...noProfile, screenShare: 'disabled' }), []);
});

test('spatial_audio_needs_transport_encryption: the server cannot attenuate what it cannot read', () => {
  assert.equal(codes({ ...stage, encryption: 'sfu_blind' }), ['spatial_audio_needs_transport_encryption']);
  assert.equal(codes({ ...stage, encryption: 'sfu_blind', spatialAudio: 'disabled' }), []);
});

test('role_authority_url_invalid: backendEndpoint()\'s rule for space and direct-call policies', () => {
  for (const url of [
    'http://backend.stage-world.test/authority',
    'https://user:secret@backend.stage-world.test/authority',
    'https://backend.stage-world.test/authority#fragment',
    'https://BACKEND.stage-world.test/authority',
    'ftp://backend.stage-world.test/authority',
    'not a url',
  ]) {
    assert.equal(codes({ ...stage, roleAuthorityUrl: url }), ['role_authority_url_invalid'], url);
  }
  assert.equal(codes({ ...stage, roleAuthorityUrl: 'http://127.0.0.1:8080/authority' }), [], 'http on loopback, for development');
  const config: MediaEnvironmentConfigV2 = {
    directCalls: {
      enabled: true,
      policy: { ...DEFAULT_DIRECT_CALL_POLICY, guestPolicy: 'callee_only', roleAuthorityUrl: 'http://backend.stage-world.test/authority', reconnectGraceSeconds: 20 },
    },
  };
  assert.ok(MediaEnvironmentConfigV2Schema.safeParse(config).success);
  assert.equal(checkMediaEnvironmentConfig(config).map((v) => [v.pointer, v.code]), [['/directCalls/policy/roleAuthorityUrl', 'role_authority_url_invalid']]);
});

test('space_id_duplicate, and violations of a whole configuration in document order with their pointers', () => {
  const config: MediaEnvironmentConfigV2 = {
    spaces: [
      { id: 'town_hall', policy: stage },
      { id: 'standup', policy: { ...meeting, maxParticipants: 20 } },
      { id: 'town_hall', policy: meeting },
    ],
    directCalls: { enabled: false },
  };
  assert.ok(MediaEnvironmentConfigV2Schema.safeParse(config).success);
  assert.equal(checkMediaEnvironmentConfig(config), [
    { pointer: '/spaces/1/policy/maxParticipants', code: 'meeting_too_large', message: 'a meeting holds at most 16 participants (not 20): use a stage for larger audiences' },
    { pointer: '/spaces/2/id', code: 'space_id_duplicate', message: 'space town_hall is already defined at /spaces/0' },
  ]);
  assert.equal(checkMediaEnvironmentConfig({ directCalls: { enabled: true } }), []);
});

test.run();
