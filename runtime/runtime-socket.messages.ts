import * as z from 'zod';

/**
 * The messages of the runtime WebSocket and of the control channel: one definition drives validation of what
 * clients send, the types of what the server sends, and the AsyncAPI document.
 */
const Ref = z.string().min(1).max(64).describe('Chosen by the client; echoed on the answer so it can match them.');
export const PresenceStateSchema = z.enum(['available', 'away', 'busy']);

/**
 * Largest server message on the runtime socket, in bytes of the frame payload in either codec; a client may set its
 * WebSocket's maximum message size to it. Every server message is bounded: presence comes in pages, and the rest carry
 * ids and text of the server's own.
 */
export const RUNTIME_MAX_OUTBOUND_BYTES = 16 * 1024;
/**
 * Members one `presence.snapshot` holds at most. A member is 99 bytes in JSON at most (an actor id of ActorId's form, a
 * state, a timestamp), so a page stays under 11 KB with the longest ref and cursor: within RUNTIME_MAX_OUTBOUND_BYTES
 * without measuring each page.
 */
export const PRESENCE_PAGE_SIZE = 100;
/** Its form is what bounds a page's size: ids of the registry's making (identity/environments.ts pairwiseActorId). */
const ActorId = z.string().regex(/^act_[0-9a-z]{26}$/).describe("The person's pairwise actor id in the Environment.");
const PresenceCursor = z
  .string()
  .regex(/^[1-9][0-9]{0,15}$/)
  .describe('The `next` of the page before, from this socket (after reconnecting, start again without `after`).');

export const RuntimeClientMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('presence.update'), state: PresenceStateSchema, ref: Ref.optional() }).describe('Set what this person shows others in the Environment. Goes through the session actor, in order with its lease changes; answered with `presence.updated`. Ephemeral: it lasts while the socket is open and is never stored (say it again after reconnecting).'),
  z
    .strictObject({ type: z.literal('presence.list'), after: PresenceCursor.optional(), ref: Ref.optional() })
    .describe(
      `Ask who is present in the Environment; answered with one \`presence.snapshot\`, a page of at most ${PRESENCE_PAGE_SIZE} members. Without \`after\` the first page; with it, the page after the one whose \`next\` it is. Pages go in the order people joined (a reconnected socket joins anew), so a walk from the first page until one without \`next\` lists everyone present throughout it exactly once; someone who joined or left meanwhile may or may not be listed (a person who left and came back possibly twice).`,
    ),
  z.strictObject({ type: z.literal('ping'), ref: Ref.optional() }).describe('Application-level round trip; answered with `pong`.'),
]);
export type RuntimeClientMessage = z.infer<typeof RuntimeClientMessage>;

const Member = z.strictObject({ actorId: ActorId, state: PresenceStateSchema, since: z.iso.datetime() });

export const LeaseEndReason = z.enum(['superseded', 'released', 'revoked', 'lapsed']);

export const RuntimeServerMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('ready'), sessionId: z.string(), leaseVersion: z.number().int(), actorId: z.string() }).describe('First message: the fence this socket holds.'),
  z.strictObject({ type: z.literal('presence.updated'), state: PresenceStateSchema, ref: Ref.optional() }),
  z
    .strictObject({
      type: z.literal('presence.snapshot'),
      members: z.array(Member).max(PRESENCE_PAGE_SIZE).describe('Present members, in the order they joined.'),
      total: z.number().int().nonnegative().describe('How many are present in the Environment as this page was made.'),
      next: PresenceCursor.optional().describe('Present when more members follow: ask `presence.list` with it as `after` for the next page.'),
      ref: Ref.optional(),
    })
    .describe('One page of `presence.list`. An Environment of a few people fits in one, without `next`.'),
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
