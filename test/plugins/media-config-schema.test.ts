import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  MediaDirectCallPolicyV2Schema,
  MediaEnvironmentConfigV2Schema,
  MediaGrantContextSchema,
  MediaSpacePolicyV2Schema,
  mediaEnvironmentConfigJsonSchema,
  mediaGrantContextJsonSchema,
  mediaSettingsJsonSchema,
  type MediaRoomPolicyV2,
} from '../../plugins/media/media-config.schema.js';

/**
 * The Media plugin's structural contract: every bound, enum and constant of media-plugin.md, in the zod schemas and in
 * the JSON Schemas generated from them.
 */

/** The room policy another part of the Media service runs on: the config's policy types must fit it as they are. */
interface RoomPolicy {
  mode: 'direct_call' | 'meeting' | 'stage';
  maxParticipants: number;
  maxSpeakerSeats: number;
  floorControl: 'fixed' | 'moderated' | 'open';
  raiseHand: 'disabled' | 'enabled';
  screenShare: 'disabled' | 'owners' | 'speakers';
  screenProfile?: 'slides' | 'motion';
  guestPolicy: 'account_required' | 'allowed' | 'callee_only';
  encryption: 'transport' | 'sfu_blind';
  spatialAudio?: 'disabled' | 'distance_attenuation';
  roleAuthorityUrl?: string;
  reconnectGraceSeconds: number;
}
const fitsRoomPolicy = (policy: MediaRoomPolicyV2): RoomPolicy => policy;

const space = {
  mode: 'stage',
  maxParticipants: 150,
  maxSpeakerSeats: 16,
  floorControl: 'moderated',
  raiseHand: 'enabled',
  screenShare: 'speakers',
  screenProfile: 'motion',
  guestPolicy: 'allowed',
  encryption: 'transport',
  spatialAudio: 'distance_attenuation',
  roleAuthorityUrl: 'https://backend.world.test/authority',
  reconnectGraceSeconds: 120,
} as const;

const directCall = {
  mode: 'direct_call',
  maxParticipants: 2,
  maxSpeakerSeats: 2,
  floorControl: 'open',
  raiseHand: 'disabled',
  screenShare: 'disabled',
  guestPolicy: 'callee_only',
  encryption: 'sfu_blind',
  spatialAudio: 'disabled',
  reconnectGraceSeconds: 5,
} as const;

const ok = (schema: { safeParse(v: unknown): { success: boolean } }, value: unknown): boolean => schema.safeParse(value).success;

test('space policy: every bound at and past its edge; optional fields optional; nothing extra', () => {
  assert.ok(ok(MediaSpacePolicyV2Schema, space));
  const { screenProfile: _a, spatialAudio: _b, roleAuthorityUrl: _c, ...required } = space;
  assert.ok(ok(MediaSpacePolicyV2Schema, required));
  assert.equal(MediaSpacePolicyV2Schema.safeParse({}).error?.issues.map((i) => i.path[0]).sort(), [
    'encryption', 'floorControl', 'guestPolicy', 'maxParticipants', 'maxSpeakerSeats', 'mode', 'raiseHand', 'reconnectGraceSeconds', 'screenShare',
  ]);
  const cases: Array<[keyof typeof space, unknown, boolean]> = [
    ['maxParticipants', 2, true], ['maxParticipants', 1, false], ['maxParticipants', 151, false], ['maxParticipants', 20.5, false],
    ['maxSpeakerSeats', 1, true], ['maxSpeakerSeats', 0, false], ['maxSpeakerSeats', 17, false],
    ['reconnectGraceSeconds', 5, true], ['reconnectGraceSeconds', 4, false], ['reconnectGraceSeconds', 121, false],
    ['roleAuthorityUrl', `https://b.test/${'a'.repeat(2048 - 15)}`, true], ['roleAuthorityUrl', `https://b.test/${'a'.repeat(2049 - 15)}`, false],
    ['mode', 'meeting', true], ['mode', 'direct_call', false],
    ['guestPolicy', 'callee_only', false], ['screenShare', 'owners', true], ['screenShare', 'everyone', false],
    ['floorControl', 'fixed', true], ['floorControl', 'chaos', false], ['encryption', 'sfu_blind', true], ['encryption', 'none', false],
    ['spatialAudio', 'disabled', true], ['spatialAudio', 'hrtf', false], ['screenProfile', 'slides', true], ['screenProfile', 'video', false],
  ];
  for (const [field, value, accepted] of cases) assert.is(ok(MediaSpacePolicyV2Schema, { ...space, [field]: value }), accepted, `${field}=${String(value).slice(0, 20)}`);
  assert.not.ok(ok(MediaSpacePolicyV2Schema, { ...space, recording: 'enabled' }), 'no additional properties');
});

test('direct-call policy: the constants, callee_only or account_required guests, no screenProfile', () => {
  assert.ok(ok(MediaDirectCallPolicyV2Schema, directCall));
  assert.ok(ok(MediaDirectCallPolicyV2Schema, { ...directCall, guestPolicy: 'account_required', roleAuthorityUrl: 'https://b.test/a' }));
  for (const [field, value] of [
    ['mode', 'meeting'], ['maxParticipants', 3], ['maxSpeakerSeats', 1], ['floorControl', 'moderated'], ['raiseHand', 'enabled'],
    ['screenShare', 'owners'], ['guestPolicy', 'allowed'], ['encryption', 'transport'], ['spatialAudio', 'distance_attenuation'],
    ['reconnectGraceSeconds', 121], ['screenProfile', 'slides'],
  ] as const) {
    assert.not.ok(ok(MediaDirectCallPolicyV2Schema, { ...directCall, [field]: value }), field);
  }
  const { spatialAudio: _, ...withoutSpatial } = directCall;
  // "Required: the same list as the space policy": that list leaves spatialAudio out.
  assert.ok(ok(MediaDirectCallPolicyV2Schema, withoutSpatial), 'spatialAudio is optional in a direct-call policy');
  fitsRoomPolicy(MediaDirectCallPolicyV2Schema.parse(directCall));
  fitsRoomPolicy(MediaSpacePolicyV2Schema.parse(space));
});

test('environment configuration: directCalls required, at most 64 spaces, the space id pattern, nothing extra', () => {
  const spaces = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `space-${i}`, policy: space }));
  assert.ok(ok(MediaEnvironmentConfigV2Schema, { directCalls: { enabled: false } }));
  assert.ok(ok(MediaEnvironmentConfigV2Schema, { spaces: spaces(64), directCalls: { enabled: true, policy: directCall } }));
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { spaces: spaces(65), directCalls: { enabled: false } }));
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { spaces: [] }), 'directCalls is required');
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { directCalls: {} }), 'directCalls.enabled is required');
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { directCalls: { enabled: true, ring: true } }));
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { directCalls: { enabled: true }, theme: 'dark' }));
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { spaces: [{ id: 'a', policy: space, name: 'A' }], directCalls: { enabled: true } }));
  assert.not.ok(ok(MediaEnvironmentConfigV2Schema, { spaces: [{ id: 'a' }], directCalls: { enabled: true } }), 'a space needs its policy');
  for (const [id, accepted] of [['a', true], ['town_hall-2', true], [`a${'b'.repeat(79)}`, true], [`a${'b'.repeat(80)}`, false], ['', false], ['1room', false], ['Room', false], ['room.a', false]] as const) {
    assert.is(ok(MediaEnvironmentConfigV2Schema, { spaces: [{ id, policy: space }], directCalls: { enabled: false } }), accepted, id);
  }
});

test('grant context: exactly one required scope of 1 to 96 characters of the pattern', () => {
  assert.equal(mediaGrantContextJsonSchema, {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { scope: { type: 'string', minLength: 1, maxLength: 96, pattern: '^[A-Za-z0-9][A-Za-z0-9:_-]{0,95}$' } },
    required: ['scope'],
    additionalProperties: false,
  });
  for (const [scope, accepted] of [['r', true], ['room:lobby_1-a', true], [`a${'b'.repeat(95)}`, true], [`a${'b'.repeat(96)}`, false], ['', false], [':room', false], ['room lobby', false]] as const) {
    assert.is(ok(MediaGrantContextSchema, { scope }), accepted, scope);
  }
  assert.not.ok(ok(MediaGrantContextSchema, {}));
  assert.not.ok(ok(MediaGrantContextSchema, { scope: 'a', space: 'b' }));
});

test('settings 1.0.0 as JSON Schema, derived from the settings definition', () => {
  assert.equal(mediaSettingsJsonSchema, {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: {
      volume: { default: 0.8, type: 'number', minimum: 0, maximum: 1, multipleOf: 0.05 },
      defaultMuted: { default: true, type: 'boolean' },
      inputDeviceId: { type: 'string', maxLength: 512 },
      outputDeviceId: { type: 'string', maxLength: 512 },
    },
    additionalProperties: false,
  });
});

test('the configuration JSON Schema carries every bound, enum and constant, and forbids extra members everywhere', () => {
  type Node = { type?: string; properties?: Record<string, Node>; items?: Node; required?: string[]; additionalProperties?: boolean; [k: string]: unknown };
  const root = mediaEnvironmentConfigJsonSchema as Node;
  assert.is(root.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.equal(root.required, ['directCalls']);
  const spaces = root.properties!.spaces!;
  assert.equal([spaces.type, spaces.maxItems], ['array', 64]);
  const item = spaces.items!;
  assert.equal(item.required, ['id', 'policy']);
  assert.equal(item.properties!.id, { type: 'string', minLength: 1, maxLength: 80, pattern: '^[a-z][a-z0-9_-]{0,79}$' });
  const policy = item.properties!.policy!;
  assert.equal(policy.required, ['mode', 'maxParticipants', 'maxSpeakerSeats', 'floorControl', 'raiseHand', 'screenShare', 'guestPolicy', 'encryption', 'reconnectGraceSeconds']);
  const p = policy.properties!;
  assert.equal(p.maxParticipants, { type: 'integer', minimum: 2, maximum: 150 });
  assert.equal(p.maxSpeakerSeats, { type: 'integer', minimum: 1, maximum: 16 });
  assert.equal(p.mode!.enum, ['stage', 'meeting']);
  assert.equal(p.screenShare!.enum, ['disabled', 'owners', 'speakers']);
  assert.equal(p.roleAuthorityUrl!.maxLength, 2048);
  assert.equal([p.reconnectGraceSeconds!.type, p.reconnectGraceSeconds!.minimum, p.reconnectGraceSeconds!.maximum], ['integer', 5, 120]);
  const direct = root.properties!.directCalls!;
  assert.equal(direct.required, ['enabled']);
  const d = direct.properties!.policy!.properties!;
  assert.equal(d.maxParticipants, { type: 'integer', const: 2 });
  assert.equal(d.maxSpeakerSeats, { type: 'integer', const: 2 });
  assert.equal([d.mode!.const, d.raiseHand!.const, d.encryption!.const, d.screenShare!.const, d.floorControl!.const, d.spatialAudio!.const], ['direct_call', 'disabled', 'sfu_blind', 'disabled', 'open', 'disabled']);
  assert.equal(d.guestPolicy!.enum, ['account_required', 'callee_only']);
  assert.not.ok('screenProfile' in d);
  const objects: Node[] = [];
  const walk = (node: Node): void => {
    if (node.type === 'object') objects.push(node);
    Object.values(node.properties ?? {}).forEach(walk);
    if (node.items) walk(node.items);
  };
  walk(root);
  assert.is(objects.length, 5);
  assert.ok(objects.every((o) => o.additionalProperties === false));
});

test.run();
