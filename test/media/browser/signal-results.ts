import * as z from 'zod';

/**
 * The `result` fields the page reads from the answers of the control protocol (the protocol module types requests
 * and leaves each `result` an object). One place to align with the server: a result that does not parse makes the
 * page's call reject with the zod message, naming the field. The harness's exposed signal answers the same shapes.
 */
const Parameters = z.looseObject({});
const Id = z.string().min(1);

export const TransportCreatedSchema = z.looseObject({
  transportId: Id,
  iceParameters: Parameters,
  iceCandidates: z.array(Parameters),
  dtlsParameters: Parameters,
});
export type TransportCreated = z.infer<typeof TransportCreatedSchema>;

export const ProducedSchema = z.looseObject({ producerId: Id });

export const ConsumedSchema = z.looseObject({
  consumerId: Id,
  producerId: Id,
  kind: z.enum(['audio', 'video']),
  rtpParameters: Parameters,
});
export type Consumed = z.infer<typeof ConsumedSchema>;

/** `revision`: the room view of the join, which arrived (in `room.state` pages) before the answer. */
export const JoinedSchema = z.looseObject({ routerRtpCapabilities: Parameters, revision: z.number().int().nonnegative().nullable() });

export const ScreenStartedSchema = z.looseObject({ screenProfile: z.enum(['slides', 'motion']) });
