/** The space policy's `screenProfile`: what a screen share mostly shows. */
export type ScreenProfile = 'slides' | 'motion';

/**
 * What a sender should ask of its encoder for a screen share, in the shapes mediasoup-client's `transport.produce()`
 * and the browser take: `encodings` and `codecOptions` go to produce(), `contentHint` to the MediaStreamTrack,
 * `degradationPreference` to the RTCRtpSender's parameters. The server only passes this through.
 */
export interface ScreenEncodingHint {
  readonly profile: ScreenProfile;
  readonly encodings: readonly { readonly maxBitrate: number; readonly maxFramerate: number; readonly scaleResolutionDownBy: number }[];
  readonly codecOptions: { readonly videoGoogleStartBitrate: number };
  readonly contentHint: 'detail' | 'motion';
  readonly degradationPreference: 'maintain-resolution' | 'maintain-framerate';
}

const HINTS: Readonly<Record<ScreenProfile, ScreenEncodingHint>> = Object.freeze({
  // Text must stay legible: full resolution, few frames (slides change seldom), let the frame rate drop first.
  slides: Object.freeze({
    profile: 'slides',
    encodings: Object.freeze([Object.freeze({ maxBitrate: 1_500_000, maxFramerate: 5, scaleResolutionDownBy: 1 })]),
    codecOptions: Object.freeze({ videoGoogleStartBitrate: 1000 }),
    contentHint: 'detail',
    degradationPreference: 'maintain-resolution',
  }),
  // Video or scrolling: smooth frames matter more than sharp ones, so resolution gives way first.
  motion: Object.freeze({
    profile: 'motion',
    encodings: Object.freeze([Object.freeze({ maxBitrate: 2_500_000, maxFramerate: 30, scaleResolutionDownBy: 1 })]),
    codecOptions: Object.freeze({ videoGoogleStartBitrate: 1500 }),
    contentHint: 'motion',
    degradationPreference: 'maintain-framerate',
  }),
});

export function screenEncodingHint(profile: ScreenProfile = 'slides'): ScreenEncodingHint {
  return HINTS[profile];
}
