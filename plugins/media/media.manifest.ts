import { createHash } from 'node:crypto';
import { PUBLISHER_AUTHORITY_ARTIFACT_ID, PUBLISHER_AUTHORITY_MEDIA_TYPE } from '../../media/publisher-authority/publisher-authority.openapi.js';
import {
  PUBLISH_SCOPE,
  PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
  PUBLISHER_AUTHORITY_OPERATION_ID,
  PUBLISHER_AUTHORITY_TIMEOUT_MS,
} from '../../media/publisher-authority/publisher-authority.messages.js';
import { REGISTRY_PUBLISHER } from '../plugin-catalog.js';
import type { PluginManifest, PluginProtocolArtifact } from '../plugin-manifest.schema.js';
import { MEDIA_MAX_SPACES, mediaEnvironmentConfigJsonSchema, mediaGrantContextJsonSchema, mediaSettingsJsonSchema } from './media-config.schema.js';
import { mediaPlugin } from './media.plugin.js';

/**
 * The Media plugin's manifest (media-plugin.md): every value of the spec, as data. Built per registry because two
 * things are only known there: the public address the network placeholders resolve to, and the exact bytes of each
 * protocol artifact, which the manifest pins by SHA-256.
 */

export const MEDIA_DATA_PLANE_ARTIFACT_ID = 'media-v2-data-plane';
export const MEDIA_DATA_PLANE_MEDIA_TYPE = 'application/vnd.aai.asyncapi+json';
export const MEDIA_CONTRACT_VERSION = '0.1.0-alpha.1';

/** The served text of each protocol artifact, exactly as sent. */
export interface MediaArtifactTexts {
  readonly [MEDIA_DATA_PLANE_ARTIFACT_ID]: string;
  readonly [PUBLISHER_AUTHORITY_ARTIFACT_ID]: string;
}

export type MediaArtifactId = keyof MediaArtifactTexts;

export const MEDIA_ARTIFACTS: Readonly<Record<MediaArtifactId, { readonly kind: 'asyncapi' | 'openapi'; readonly specificationVersion: string; readonly mediaType: string }>> = Object.freeze({
  [MEDIA_DATA_PLANE_ARTIFACT_ID]: { kind: 'asyncapi', specificationVersion: '3.0.0', mediaType: MEDIA_DATA_PLANE_MEDIA_TYPE },
  [PUBLISHER_AUTHORITY_ARTIFACT_ID]: { kind: 'openapi', specificationVersion: '3.1.0', mediaType: PUBLISHER_AUTHORITY_MEDIA_TYPE },
});

export const MEDIA_FRONTEND_EXPORTS = [
  'createMediaV2Runtime',
  'mediaV2ProblemMessageFa',
  'mediaV2MicrophoneMessageFa',
  'mediaV2PlaybackMessageFa',
  'mediaV2TransportMessageFa',
  'mediaV2BootstrapMessageFa',
  'mediaV2SelfMember',
  'mediaV2IsJoined',
  'mediaV2IsModerator',
  'mediaV2ActiveMembers',
  'mediaV2PendingSpeakerOfferForSelf',
  'mediaV2RaisedHandQueue',
  'mediaV2MicrophoneButton',
  'mediaV2CallableActorKeySet',
  'mediaV2RecoveryOffer',
  'MediaV2RuntimeProvider',
  'useMediaV2',
  'mediaPluginManifest',
  'MediaV2ClientMessageSchema',
  'MediaV2ServerMessageSchema',
  'MediaSpacePolicyV2Schema',
  'MediaEnvironmentConfigV2Schema',
  'MediaV2ActionError',
  'mediaV2AudioGate',
  'mediaV2MediaTransportMessageFa',
  'mediaV2ConnectionQualityMessageFa',
] as const;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Where the catalog serves an artifact of the Media plugin. */
export function mediaArtifactPath(artifactId: MediaArtifactId): string {
  return `/v1/catalog/plugins/${mediaPlugin.pluginId}/artifacts/${artifactId}`;
}

/**
 * `publicUrl` is this registry's public base URL: `{media_url}` resolves to its origin and `{rtc_url}` to the same
 * host over WebSocket (wss for https; a plain-http development registry resolves to http and ws).
 */
export function buildMediaManifest(input: { publicUrl: string; artifacts: MediaArtifactTexts }): PluginManifest {
  const base = new URL(input.publicUrl);
  const mediaOrigin = base.origin;
  const rtcOrigin = `${base.protocol === 'https:' ? 'wss:' : 'ws:'}//${base.host}`;
  const publicBase = input.publicUrl.replace(/\/$/, '');
  const artifact = (id: MediaArtifactId): PluginProtocolArtifact => ({
    id,
    ...MEDIA_ARTIFACTS[id],
    sha256: sha256Hex(input.artifacts[id]),
    url: `${publicBase}${mediaArtifactPath(id)}`,
  });
  const settings = mediaPlugin.settingsSchema;
  return {
    pluginId: mediaPlugin.pluginId,
    slug: mediaPlugin.slug,
    name: mediaPlugin.name,
    description:
      'Direct calls, meetings, large audio stages and screen sharing for independent web Environments. Media is not ' +
      'recorded or transcribed. No movement or position data is collected. Session state and invitations are ' +
      'ephemeral, and security audit events follow the platform retention policy.',
    version: mediaPlugin.version,
    contractVersion: MEDIA_CONTRACT_VERSION,
    category: 'communication',
    kind: 'full_stack',
    runtimeClass: 'trusted_library',
    publisher: { ...REGISTRY_PUBLISHER },
    capabilities: ['media:direct-call', 'media:meeting', 'media:stage', 'media:screen-share'],
    frontendAdapters: [
      {
        id: 'react',
        runtime: 'react',
        exportPath: '.',
        peerDependencies: { react: '>=18' },
        semanticPorts: { provides: [], requires: [] },
        exports: [...MEDIA_FRONTEND_EXPORTS],
      },
    ],
    backendComponents: [
      {
        id: 'control',
        name: 'Media control plane',
        protocol: 'websocket',
        protocolArtifactId: MEDIA_DATA_PLANE_ARTIFACT_ID,
        capabilities: ['call:signaling', 'space:membership', 'media:authorization', 'moderation'],
        grantScopes: ['media:connect', 'media:direct-call', 'media:join-space', 'media:request-speak', PUBLISH_SCOPE],
        context: mediaGrantContextJsonSchema,
      },
    ],
    hostCallbacks: [
      {
        id: 'publisher-authority',
        operationId: PUBLISHER_AUTHORITY_OPERATION_ID,
        protocolArtifactId: PUBLISHER_AUTHORITY_ARTIFACT_ID,
        target: 'environment_backend',
        address: '/spaces/{index}/policy/roleAuthorityUrl',
        credential: { kind: 'forwarded_plugin_grant', bodyField: 'grant', requiredScope: PUBLISH_SCOPE },
        timeoutMs: PUBLISHER_AUTHORITY_TIMEOUT_MS,
        maxResponseBytes: PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
        redirects: 'error',
        onFailure: 'deny',
      },
    ],
    platformPermissions: ['identity:read', 'profile:read', 'settings:read', 'settings:write', 'plugin-grant:request'],
    browserRequirements: [
      { permission: 'microphone', optional: true, requestedWhen: 'only when the participant chooses to speak' },
      { permission: 'display-capture', optional: true, requestedWhen: 'only when the participant explicitly starts screen sharing' },
    ],
    network: {
      origins: [
        { template: '{media_url}', scheme: 'https', origin: mediaOrigin, purpose: 'authenticated control traffic' },
        { template: '{rtc_url}', scheme: 'wss', origin: rtcOrigin, purpose: 'self-hosted WebRTC media transport' },
      ],
    },
    data: {
      collected: ['pairwise_plugin_actor', 'authoritative_display_profile', 'environment_and_scope', 'session_membership', 'connection_diagnostics'],
      sharedWithOthers: [],
      mediaRecorded: false,
      mediaTranscribed: false,
      movementOrPositionCollected: false,
    },
    installationConfiguration: { schema: mediaEnvironmentConfigJsonSchema },
    settings: {
      schemaVersion: settings.version,
      schema: mediaSettingsJsonSchema,
      scopes: Object.fromEntries(Object.entries(settings.settings).map(([name, definition]) => [name, [...definition.scopes]])),
    },
    limits: {
      maxConcurrentSessions: 1,
      maxParticipantsPerContext: 150,
      maxMessageBytes: 16384,
      requestsPerMinute: 600,
      maxSpaces: MEDIA_MAX_SPACES,
      minSpaceParticipants: 2,
      maxSpaceParticipants: 150,
      minSpeakerSeatsPerSpace: 1,
      maxSpeakerSeatsPerSpace: 16,
      directCallParticipants: 2,
      directCallSpeakerSeats: 2,
      minReconnectGraceSeconds: 5,
      maxReconnectGraceSeconds: 120,
      callbackTimeoutMs: PUBLISHER_AUTHORITY_TIMEOUT_MS,
      callbackMaxResponseBytes: PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
      maxSettingDeviceIdLength: 512,
    },
    versioning: {
      pluginVersion: mediaPlugin.version,
      contractVersion: MEDIA_CONTRACT_VERSION,
      compatibleContracts: `^${MEDIA_CONTRACT_VERSION}`,
      compatibleSdk: `^${MEDIA_CONTRACT_VERSION}`,
      settingsSchemaVersion: settings.version,
      controlProtocol: 'AsyncAPI 3.0.0',
      publisherAuthority: 'OpenAPI 3.1.0',
      license: 'MIT',
    },
    protocolArtifacts: [artifact(MEDIA_DATA_PLANE_ARTIFACT_ID), artifact(PUBLISHER_AUTHORITY_ARTIFACT_ID)],
  };
}
