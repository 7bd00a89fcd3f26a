import * as z from 'zod';

/**
 * The Media control protocol (`media-v2-data-plane`): every message a client may send and every message the server
 * sends. These two schemas validate the socket's traffic, type the server code and generate the AsyncAPI document;
 * the browser side imports the same module (it depends on zod only).
 *
 * Requests carry an `id` the server echoes on exactly one `response`. Room state reaches clients as whole views with a
 * growing `revision` (a client keeps the highest it got on this connection), so a client that missed one catches up
 * with the next and never applies deltas out of order. No message exceeds maxMessageBytes, so a view is sent in pages
 * (`room.state`, then `room.state.members`, back to back) that a client puts together with `RoomViewAssembler`.
 * Changes that follow one another closely reach clients as one view (revisions may skip); see ROOM_STATE_INTERVAL_MS.
 */
export const MEDIA_PROTOCOL_VERSION = 'media-v2';

/**
 * Transports one member may hold in each direction (ours, not the contract's): a client uses one, and may make a second
 * when the first failed (the protocol has no transport.close; leaving the room closes them). Each recv transport
 * reserves consumers in a router's budget, so without a bound one listener could make the room add routers.
 */
export const TRANSPORTS_PER_DIRECTION = 2;

/**
 * At most one whole room view (`room.state` and its pages, 30–40 KB in a full stage) leaves per room per this interval: a change
 * after a quiet spell goes out at once, and the changes that follow within the interval go out together as the newest
 * view at its end. A member is never sent another message before the view of the changes that came before it (the
 * view it is owed goes first), and the sender of a request gets the view of its change before its response.
 */
export const ROOM_STATE_INTERVAL_MS = 100;

const RequestId = z.string().min(1).max(64).describe('Chosen by the client; the server echoes it on the one `response` to this request.');
const MediaId = z.string().min(1).max(64);
const MemberId = z.string().min(1).max(64).describe("A member's pairwise actor id in the Environment.");
/**
 * mediasoup's own parameter objects (RTP capabilities and parameters, DTLS parameters) pass through as objects; the
 * SFU validates them and a malformed one is answered `invalid_media_parameters`.
 */
const MediaParameters = z.looseObject({}).describe('A mediasoup-client parameter object, passed to the SFU as given.');

/**
 * mediasoup has no validator of its own for these (it has for RTP parameters and capabilities), and the worker is no
 * place to find out that a fingerprint is null: checked here, as the protocol's own shape.
 */
const DtlsParameters = z
  .looseObject({
    role: z.enum(['auto', 'client', 'server']).optional(),
    fingerprints: z
      .array(z.strictObject({ algorithm: z.enum(['sha-1', 'sha-224', 'sha-256', 'sha-384', 'sha-512']), value: z.string().regex(/^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){15,63}$/) }))
      .min(1)
      .max(8),
  })
  .describe('The DTLS parameters of the client side (mediasoup-client `dtlsParameters`): an optional role and 1 to 8 certificate fingerprints.');

export const MediaSourceSchema = z.enum(['microphone', 'screen']);
export type MediaSource = z.infer<typeof MediaSourceSchema>;

function request<T extends string, S extends z.core.$ZodLooseShape>(type: T, shape: S, description: string) {
  return z.strictObject({ type: z.literal(type), id: RequestId, ...shape }).describe(description);
}

export const MediaV2ClientMessageSchema = z.discriminatedUnion('type', [
  request('room.join', { rtpCapabilities: MediaParameters }, "Join the room of the grant's context scope (a space, or a direct call). Answered with the router's RTP capabilities and the member's own entry, after the whole room view (`room.state` and its pages) that shows the join; a member inside its reconnect grace resumes its seat, role and hand. A new member is seated on join (an `open` floor, or a moderator) only if its grant holds `media:request-speak`, as `floor.take` needs."),
  request('room.leave', {}, 'Leave for good: the seat, hand and any offer are given up at once (no grace).'),
  request('transport.create', { direction: z.enum(['send', 'recv']) }, `Create a WebRTC transport; answered with its id, ICE and DTLS parameters. A member holds at most ${TRANSPORTS_PER_DIRECTION} per direction (\`transport_limit\`); leaving the room closes them.`),
  request('transport.connect', { transportId: MediaId, dtlsParameters: DtlsParameters }, "Complete a transport's DTLS setup."),
  request('produce', { transportId: MediaId, kind: z.enum(['audio', 'video']), source: MediaSourceSchema, rtpParameters: MediaParameters }, 'Publish the microphone (needs a seat) or the screen (needs to be the sharer): one producer per source at a time (`producer_exists`). `kind` is `audio` for the microphone and `video` for the screen, and every codec of `rtpParameters` is of that kind (`invalid_media_parameters`). Needs grant scope `media:publish`; a space with a `roleAuthorityUrl` asks the Environment backend first, and any failure there refuses.'),
  request('producer.close', { producerId: MediaId }, 'Stop publishing one source.'),
  request('consume', { transportId: MediaId, producerId: MediaId }, "Receive another member's producer on a recv transport; the consumer starts paused. Asked again for the same producer and transport, answered with the same consumer."),
  request('consumer.resume', { consumerId: MediaId }, 'Start a paused consumer once the client has set it up.'),
  request('hand.raise', {}, 'Join the ordered raise-hand queue (`raiseHand: enabled` only; scope `media:request-speak`).'),
  request('hand.lower', {}, 'Leave the raise-hand queue.'),
  request('hand.dismiss', { target: MemberId }, "Moderator: remove someone's raised hand."),
  request('speaker.offer', { target: MemberId }, 'Moderator: offer a listener a speaker seat.'),
  request('speaker.accept', {}, 'Accept the pending speaker offer to self (scope `media:request-speak`).'),
  request('speaker.decline', {}, 'Decline the pending speaker offer to self.'),
  request('speaker.revoke', { target: MemberId }, 'Moderator: move a speaker back to the audience.'),
  request('floor.take', {}, 'Open floor: take a free speaker seat (scope `media:request-speak`).'),
  request('floor.release', {}, 'Give up the own speaker seat.'),
  request('screen.start', {}, "Become the room's one screen sharer (policy `screenShare`; scope `media:publish`, as publishing the screen needs); answered with the encoding hint of `screenProfile`."),
  request('screen.stop', {}, 'Stop sharing the screen.'),
  request('grant.refresh', { grant: z.string().min(1).max(256) }, 'Hand over a fresh plugin grant of the same person, Environment and context before the current one expires; the connection then lives until the new expiry.'),
  request('e2ee.key', { to: MemberId, envelope: z.string().min(1).max(4096) }, '`sfu_blind` rooms only: relay an end-to-end key envelope to one member. The server never reads it.'),
  request('ping', {}, 'Application-level round trip.'),
]);
export type MediaV2ClientMessage = z.infer<typeof MediaV2ClientMessageSchema>;
export type MediaV2ClientMessageType = MediaV2ClientMessage['type'];

/** Longest display name a member view carries: with MemberId's bound, what keeps one member within a page. */
export const DISPLAY_NAME_MAX_LENGTH = 128;

export const MemberViewSchema = z.strictObject({
  memberId: MemberId,
  displayName: z.string().max(DISPLAY_NAME_MAX_LENGTH),
  role: z.enum(['moderator', 'speaker', 'listener']).describe('`moderator`s hold the Environment admin role; a moderator with a seat also speaks (`seated`).'),
  seated: z.boolean(),
  connection: z.enum(['connected', 'dropped']).describe('`dropped`: lost its connection and keeps everything until `graceUntil`.'),
  graceUntil: z.iso.datetime().nullable(),
  handRaisedAt: z.iso.datetime().nullable(),
  handPosition: z.number().int().positive().nullable().describe("The member's place in the raise-hand queue (1 is first); null while its hand is down."),
  offer: z.strictObject({ by: MemberId, expiresAt: z.iso.datetime() }).nullable().describe('The pending speaker offer to this member: which moderator made it, and when it expires.'),
});
export type MemberView = z.infer<typeof MemberViewSchema>;

const RoomPolicyViewSchema = z.strictObject({
  maxParticipants: z.number().int(),
  maxSpeakerSeats: z.number().int(),
  floorControl: z.enum(['fixed', 'moderated', 'open']),
  raiseHand: z.enum(['disabled', 'enabled']),
  screenShare: z.enum(['disabled', 'owners', 'speakers']),
  screenProfile: z.enum(['slides', 'motion']),
  encryption: z.enum(['transport', 'sfu_blind']),
  reconnectGraceSeconds: z.number().int(),
});

/** The room-level part of a view: bounded whatever the number of members. */
export const RoomHeaderSchema = z.strictObject({
  roomId: z.string(),
  scope: z.string(),
  revision: z.number().int().nonnegative(),
  mode: z.enum(['direct_call', 'meeting', 'stage']),
  policy: RoomPolicyViewSchema,
  screenSharer: MemberId.nullable(),
});
export type RoomHeader = z.infer<typeof RoomHeaderSchema>;

/**
 * The whole room view as a client holds it once it has every page of one revision (`RoomViewAssembler`): the header,
 * every member in join order, and, for convenience, the raise-hand queue (first raised first) and the pending offers
 * (in member order), both read off the members. Never sent as one message: a full stage is 30-40 KB.
 */
export const RoomViewSchema = RoomHeaderSchema.extend({
  members: z.array(MemberViewSchema),
  handQueue: z.array(MemberId).describe('Raised hands, first raised first.'),
  offers: z.array(z.strictObject({ target: MemberId, by: MemberId, expiresAt: z.iso.datetime() })),
});
export type RoomView = z.infer<typeof RoomViewSchema>;

/** The view of a header and its members: the raise-hand queue and the offers are read off the members. */
export function roomView(header: RoomHeader, members: readonly MemberView[]): RoomView {
  const hands = members.filter((m) => m.handPosition !== null).sort((a, b) => (a.handPosition ?? 0) - (b.handPosition ?? 0));
  return {
    ...header,
    members: [...members],
    handQueue: hands.map((m) => m.memberId),
    offers: members.flatMap((m) => (m.offer ? [{ target: m.memberId, by: m.offer.by, expiresAt: m.offer.expiresAt }] : [])),
  };
}

export const ProducerViewSchema = z.strictObject({ producerId: MediaId, memberId: MemberId, kind: z.enum(['audio', 'video']), source: MediaSourceSchema });

const ErrorBody = z.strictObject({
  code: z.string(),
  message: z.string(),
  requestId: z.string().describe('Minted for this refusal and logged with it, for support (every error carries a request id).'),
});

export const MediaV2ServerMessageSchema = z.discriminatedUnion('type', [
  z
    .strictObject({ type: z.literal('hello'), protocol: z.literal(MEDIA_PROTOCOL_VERSION), memberId: MemberId, scope: z.string(), grantExpiresAt: z.iso.datetime(), limits: z.strictObject({ maxMessageBytes: z.number().int(), requestsPerMinute: z.number().int() }) })
    .describe('First message on a new connection: who the grant says this is, and until when the connection may live without `grant.refresh`.'),
  z
    .strictObject({ type: z.literal('response'), id: RequestId, ok: z.boolean(), result: z.looseObject({}).optional(), error: ErrorBody.optional() })
    .describe('The answer to one request: `ok: true` with a `result` that depends on the request type, or `ok: false` with an `error` (the request was refused; the connection stays open).'),
  z
    .strictObject({
      type: z.literal('room.state'),
      room: RoomHeaderSchema,
      membersTotal: z.number().int().nonnegative().describe('Members in this view, over all its pages.'),
      pages: z.number().int().positive().describe('Messages this view takes: this one, then `pages - 1` `room.state.members` of the same `revision`.'),
      members: z.array(MemberViewSchema).describe('The first members, in join order.'),
    })
    .describe(
      `The room view after a change, in pages so that no message exceeds maxMessageBytes: this header with the first members, then \`pages - 1\` \`room.state.members\` with the rest, sent back to back (nothing comes between them). A view is complete when its last page arrived and it holds \`membersTotal\` members; apply it then, whole (the raise-hand queue is the members' \`handPosition\`s, the offers their \`offer\`s). A \`room.state\` of a higher \`revision\` supersedes an unfinished view; pages of any other revision are ignored. Changes within ${ROOM_STATE_INTERVAL_MS} ms of the last view sent come together as the newest view at the end of that interval, so \`revision\` may skip; no other message to a member and no \`response\` to its own request (\`room.join\` included) comes before the whole view of the changes made before it. (Keep the highest \`revision\` of this connection: a room retired after standing empty starts again at 0, so a view kept from an earlier connection does not count.)`,
    ),
  z
    .strictObject({
      type: z.literal('room.state.members'),
      revision: z.number().int().nonnegative().describe('The `revision` of the `room.state` this page continues.'),
      page: z.number().int().min(2).describe('2 for the first continuation, up to `pages`.'),
      pages: z.number().int().min(2),
      members: z.array(MemberViewSchema).describe('The next members, in join order.'),
    })
    .describe('A continuation page of the `room.state` of the same `revision`: the members that follow those of the page before.'),
  z.strictObject({ type: z.literal('producer.added'), producer: ProducerViewSchema }).describe('Someone started publishing: `consume` it to hear or see it.'),
  z.strictObject({ type: z.literal('producer.removed'), producerId: MediaId }).describe('A producer ended; its consumers are closed.'),
  z.strictObject({ type: z.literal('media.reset'), reason: z.enum(['worker_lost']) }).describe("The member's media is gone (`worker_lost`: the SFU process serving it was replaced; recreate transports and re-produce; seat and role are kept; while no worker can take the room its calls are refused `media_unavailable`, and a member holding no transport is sent `media.reset` again once they are served; a member whose call the worker's death cut, or refused `media_unavailable` during the loss, is sent it once the room is served again, its other media closed with it). A lost seat or share is not a reset: its producer is closed (`producer.removed`) and `room.state` shows why."),
  z.strictObject({ type: z.literal('e2ee.key'), from: MemberId, envelope: z.string() }).describe('An end-to-end key envelope relayed from another member (`sfu_blind` rooms).'),
  z
    .strictObject({ type: z.literal('session.ended'), reason: z.enum(['replaced', 'grant_expired', 'grant_ended', 'removed']) })
    .describe('The connection closes right after: `replaced` by a newer connection of the same person (maxConcurrentSessions 1), the grant expired or ended (supersession, logout, revocation), or the member was removed.'),
  z
    .strictObject({ type: z.literal('error'), code: z.string(), message: z.string(), requestId: z.string(), details: z.array(z.unknown()).optional() })
    .describe("A message that could not be read (e.g. `validation_failed`, `rate_limited`); it has no `id` to answer. `requestId` is this error's, also in the server's log."),
]);
export type MediaV2ServerMessage = z.infer<typeof MediaV2ServerMessageSchema>;

/**
 * Puts a room view back together from its pages (`room.state`, then `room.state.members`): feed it every server
 * message of one connection in order; it answers the view a message completed, and holds the newest complete one.
 * Pages of an older or unfinished revision are dropped, a page out of order abandons its view (the next change sends
 * a whole new one), and a view whose member count is not `membersTotal` is never applied.
 */
export class RoomViewAssembler {
  #view: RoomView | null = null;
  #partial: { readonly header: RoomHeader; readonly total: number; readonly pages: number; readonly members: MemberView[]; next: number } | null = null;

  /** The newest complete view of this connection. */
  get view(): RoomView | null {
    return this.#view;
  }

  /** The view `message` completed, or null (another message, a page of a view still incomplete, or a stale one). */
  accept(message: MediaV2ServerMessage): RoomView | null {
    if (message.type === 'room.state') {
      const { revision } = message.room;
      if (this.#view && revision <= this.#view.revision) return null;
      if (this.#partial && revision <= this.#partial.header.revision) return null;
      this.#partial = { header: message.room, total: message.membersTotal, pages: message.pages, members: [...message.members], next: 2 };
      return this.#complete();
    }
    if (message.type === 'room.state.members') {
      const partial = this.#partial;
      if (!partial || message.revision !== partial.header.revision) return null;
      if (message.page !== partial.next || message.pages !== partial.pages) {
        this.#partial = null;
        return null;
      }
      partial.members.push(...message.members);
      partial.next += 1;
      return this.#complete();
    }
    return null;
  }

  #complete(): RoomView | null {
    const partial = this.#partial;
    if (!partial || partial.next <= partial.pages) return null;
    this.#partial = null;
    if (partial.members.length !== partial.total) return null;
    this.#view = roomView(partial.header, partial.members);
    return this.#view;
  }
}

/** The limits of the contract (media-plugin.md, Limits). */
export const MEDIA_LIMITS = Object.freeze({
  maxConcurrentSessions: 1,
  maxParticipantsPerContext: 150,
  maxMessageBytes: 16_384,
  requestsPerMinute: 600,
});

/** Close codes beyond the WebSocket framework's own (transport/ws/endpoint.ts). */
export const MediaCloseCode = Object.freeze({
  grantEnded: 4401,
  replaced: 4409,
  grantExpired: 4410,
  removed: 4403,
});
