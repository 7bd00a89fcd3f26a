import * as z from 'zod';

/**
 * The messages of the runtime WebSocket and of the control channel: one definition drives validation of what
 * clients send, the types of what the server sends, and the AsyncAPI document.
 */
const Ref = z.string().min(1).max(64).describe('Chosen by the client; echoed on the answer so it can match them.');
export const PresenceStateSchema = z.enum(['available', 'away', 'busy']);

export const RuntimeClientMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('presence.update'), state: PresenceStateSchema, ref: Ref.optional() }).describe('Set what this person shows others in the Environment. Goes through the session actor, in order with its lease changes; answered with `presence.updated`. Ephemeral: it lasts while the socket is open and is never stored (say it again after reconnecting).'),
  z.strictObject({ type: z.literal('presence.list'), ref: Ref.optional() }).describe('Ask who is present in the Environment; answered with `presence.snapshot`.'),
  z.strictObject({ type: z.literal('ping'), ref: Ref.optional() }).describe('Application-level round trip; answered with `pong`.'),
]);
export type RuntimeClientMessage = z.infer<typeof RuntimeClientMessage>;

const Member = z.strictObject({ actorId: z.string(), state: PresenceStateSchema, since: z.iso.datetime() });

export const LeaseEndReason = z.enum(['superseded', 'released', 'revoked', 'lapsed']);

export const RuntimeServerMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('ready'), sessionId: z.string(), leaseVersion: z.number().int(), actorId: z.string() }).describe('First message: the fence this socket holds.'),
  z.strictObject({ type: z.literal('presence.updated'), state: PresenceStateSchema, ref: Ref.optional() }),
  z.strictObject({ type: z.literal('presence.snapshot'), members: z.array(Member), ref: Ref.optional() }),
  z.strictObject({ type: z.literal('pong'), ref: Ref.optional() }),
  z
    .strictObject({ type: z.literal('hint'), topic: z.enum(['presence']) })
    .describe('Content-free: something the client may read changed (coalesced). It only schedules the authorized read (`presence.list`).'),
  z
    .strictObject({ type: z.literal('lease.ended'), reason: LeaseEndReason })
    .describe('The fence no longer holds; the socket closes right after (4409 superseded, 4401 revoked, 4410 released, 4412 lapsed).'),
  z
    .strictObject({ type: z.literal('error'), code: z.string(), message: z.string(), requestId: z.string(), details: z.array(z.unknown()).optional() })
    .describe("A refused message; the socket stays open unless a close follows. `requestId` is this error's, also in the server's log."),
]);
export type RuntimeServerMessage = z.infer<typeof RuntimeServerMessage>;

export const ControlServerMessage = z.discriminatedUnion('type', [
  z
    .strictObject({
      type: z.literal('session.activity'),
      sessionId: z.string(),
      status: z.enum(['standby', 'active', 'superseded', 'released', 'revoked']),
      leaseVersion: z.number().int().nullable(),
      reason: z
        .enum(['connected', 'activated', 'superseded', 'lease_lapsed', 'released', 'idle_expired', 'browser_logout'])
        .describe('`idle_expired`: the platform released the session after it stayed without the lease (standby or superseded) for its idle time.'),
      at: z.iso.datetime(),
    })
    .describe("The session's state changed (or, with reason `connected`, what it is when the channel opens)."),
  z.strictObject({ type: z.literal('browser.signed_out'), sessionId: z.string(), at: z.iso.datetime() }).describe('Browser SSO logout: the session is revoked; the channel closes (4401) right after.'),
  z.strictObject({ type: z.literal('error'), code: z.string(), message: z.string(), requestId: z.string() }),
]);
export type ControlServerMessage = z.infer<typeof ControlServerMessage>;

/** Close codes of both sockets beyond the framework's own (see transport/ws/endpoint.ts). */
export const RuntimeCloseCode = Object.freeze({
  revoked: 4401,
  superseded: 4409,
  released: 4410,
  replaced: 4411,
  lapsed: 4412,
});
