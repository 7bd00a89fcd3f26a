import type { types } from 'mediasoup';

/** How a room's media is protected; `sfu_blind` rooms carry end-to-end encrypted payloads the server must not read. */
export type EncryptionMode = 'transport' | 'sfu_blind';

/** Opus for voice; VP8 and H264 (constrained baseline, what every browser encodes in hardware) for screen video. */
export const ROOM_MEDIA_CODECS: readonly types.RouterRtpCodecCapability[] = Object.freeze([
  { kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2 },
  { kind: 'video', mimeType: 'video/VP8', clockRate: 90000 },
  {
    kind: 'video',
    mimeType: 'video/H264',
    clockRate: 90000,
    parameters: { 'packetization-mode': 1, 'profile-level-id': '42e01f', 'level-asymmetry-allowed': 1 },
  },
]);

/**
 * The per-packet voice level a sender writes in clear beside the payload (RFC 6464). End-to-end encryption leaves it
 * readable, and it tells who speaks when, so `sfu_blind` rooms never negotiate it.
 */
export const AUDIO_LEVEL_EXTENSION = 'urn:ietf:params:rtp-hdrext:ssrc-audio-level';

/** The router's capabilities as handed to clients (and used to consume): in `sfu_blind`, without the audio level. */
export function clientRtpCapabilities(capabilities: types.RtpCapabilities, encryption: EncryptionMode): types.RtpCapabilities {
  if (encryption === 'transport') return capabilities;
  return {
    ...capabilities,
    headerExtensions: capabilities.headerExtensions?.filter((e) => e.uri !== AUDIO_LEVEL_EXTENSION),
  };
}

/** A producer's RTP parameters as the router takes them: in `sfu_blind`, a sender's audio level is not read either. */
export function producerRtpParameters(rtpParameters: types.RtpParameters, encryption: EncryptionMode): types.RtpParameters {
  if (encryption === 'transport' || !rtpParameters.headerExtensions) return rtpParameters;
  return { ...rtpParameters, headerExtensions: rtpParameters.headerExtensions.filter((e) => e.uri !== AUDIO_LEVEL_EXTENSION) };
}
