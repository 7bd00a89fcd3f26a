import * as z from 'zod';
import { toJsonSchema, type JsonSchema } from '../json-schema.js';
import { settingsJsonSchema } from '../settings/settings-json-schema.js';
import { mediaSettingsSchema } from './media-settings.schema.js';

/**
 * The Media plugin's structural contract (media-plugin.md, "Installation configuration", "Context", "Settings"): the
 * zod schemas are the one source; the JSON Schemas the manifest publishes are generated from them. These are the
 * bounds the registry checks; the Media service's cross-field rules are in media-policy.check.ts.
 */

export const MEDIA_SPACE_ID = /^[a-z][a-z0-9_-]{0,79}$/;
export const MEDIA_CONTEXT_SCOPE = /^[A-Za-z0-9][A-Za-z0-9:_-]{0,95}$/;
export const MEDIA_MAX_SPACES = 64;
export const ROLE_AUTHORITY_URL_MAX = 2048;

const roleAuthorityUrl = z.string().max(ROLE_AUTHORITY_URL_MAX).describe('The address of the publisher-authority callback on the Environment backend.');
const reconnectGraceSeconds = z.int().min(5).max(120).describe('Seconds a dropped participant keeps their place.');

export const MediaSpacePolicyV2Schema = z
  .object({
    mode: z.enum(['stage', 'meeting']),
    maxParticipants: z.int().min(2).max(150),
    maxSpeakerSeats: z.int().min(1).max(16),
    floorControl: z.enum(['fixed', 'moderated', 'open']),
    raiseHand: z.enum(['disabled', 'enabled']),
    screenShare: z.enum(['disabled', 'owners', 'speakers']),
    screenProfile: z.enum(['slides', 'motion']).optional(),
    guestPolicy: z.enum(['account_required', 'allowed']),
    encryption: z.enum(['transport', 'sfu_blind']),
    spatialAudio: z.enum(['disabled', 'distance_attenuation']).optional(),
    roleAuthorityUrl: roleAuthorityUrl.optional(),
    reconnectGraceSeconds,
  })
  .strict();

export const MediaDirectCallPolicyV2Schema = z
  .object({
    mode: z.literal('direct_call'),
    maxParticipants: z.literal(2),
    maxSpeakerSeats: z.literal(2),
    floorControl: z.literal('open'),
    raiseHand: z.literal('disabled'),
    screenShare: z.literal('disabled'),
    guestPolicy: z.enum(['account_required', 'callee_only']),
    encryption: z.literal('sfu_blind'),
    // Optional: "Required: the same list as the space policy", whose list leaves spatialAudio out.
    spatialAudio: z.literal('disabled').optional(),
    roleAuthorityUrl: roleAuthorityUrl.optional(),
    reconnectGraceSeconds,
  })
  .strict();

export const MediaSpaceV2Schema = z
  .object({
    id: z.string().min(1).max(80).regex(MEDIA_SPACE_ID),
    policy: MediaSpacePolicyV2Schema,
  })
  .strict();

export const MediaEnvironmentConfigV2Schema = z
  .object({
    spaces: z.array(MediaSpaceV2Schema).max(MEDIA_MAX_SPACES).optional(),
    directCalls: z
      .object({
        enabled: z.boolean(),
        policy: MediaDirectCallPolicyV2Schema.optional(),
      })
      .strict(),
  })
  .strict();

/** The object passed with a connection to the control component. */
export const MediaGrantContextSchema = z
  .object({ scope: z.string().min(1).max(96).regex(MEDIA_CONTEXT_SCOPE) })
  .strict();

export type MediaSpacePolicyV2 = z.output<typeof MediaSpacePolicyV2Schema>;
export type MediaDirectCallPolicyV2 = z.output<typeof MediaDirectCallPolicyV2Schema>;
/** Either policy: what a room runs under (structurally a `RoomPolicy`). */
export type MediaRoomPolicyV2 = MediaSpacePolicyV2 | MediaDirectCallPolicyV2;
export type MediaSpaceV2 = z.output<typeof MediaSpaceV2Schema>;
export type MediaEnvironmentConfigV2 = z.output<typeof MediaEnvironmentConfigV2Schema>;
export type MediaGrantContext = z.output<typeof MediaGrantContextSchema>;

export const mediaEnvironmentConfigJsonSchema: JsonSchema = Object.freeze(toJsonSchema(MediaEnvironmentConfigV2Schema));
export const mediaGrantContextJsonSchema: JsonSchema = Object.freeze(toJsonSchema(MediaGrantContextSchema));
export const mediaSettingsJsonSchema: JsonSchema = Object.freeze(settingsJsonSchema(mediaSettingsSchema));
