import type { types } from 'mediasoup';
import { validateAndNormalizeRtpCapabilities, validateAndNormalizeRtpParameters } from 'mediasoup/ortc';
import type { Logger } from 'pino';
import type { ActorHost } from '../../actors/actor-host.js';
import type { Clock, TimerHandle } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND } from '../../actors/media.actors.js';
import type { MediaRoomEmitted, MediaRoomReply, MediaRoomRequest, RoomChange } from '../../machines/media-room/media-room.events.js';
import type { DeadlineChange } from '../../machines/media-room/media-room.machine.js';
import type { RoomPolicy } from '../../machines/media-room/media-room.policy.js';
import { HOSTING_TTL_MS, type MediaRoomContext } from '../../machines/media-room/media-room.state.js';
import { mediaRoomView } from '../../machines/media-room/media-room.view.js';
import { coordinated } from '../../runtime/coordination.js';
import { MediaError } from '../media-error.js';
import { PUBLISH_SCOPE } from '../publisher-authority/publisher-authority.messages.js';
import { assertServable, RoomMedia, type ProducerClosed } from '../room-media.js';
import { screenEncodingHint } from '../screen-profile.js';
import { isWorkerLoss, type MediaWorkerPool } from '../worker-pool.js';
import { MEDIA_LIMITS, ROOM_STATE_INTERVAL_MS, type MediaV2ClientMessage, type MediaV2ServerMessage, type MediaSource, type RoomView } from './media-control.messages.js';
import { MediaRequestError, type MediaConnection, type MediaRoomsPort } from './media-control.socket.js';
import { roomStateMessages, type RoomStateMessage } from './room-state-pages.js';

type RoomRequestMessage = Parameters<MediaRoomsPort['request']>[1];
type Without<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

/** Where a connection's scope leads: a configured space's policy, or a direct call's. */
export interface RoomTarget {
  readonly kind: 'space' | 'call';
  readonly policy: RoomPolicy;
  /** Violations of the Media service's cross-field check: a room with any is not opened (`policy_invalid`). */
  readonly violations: readonly string[];
}

/**
 * Direct calls one person may be in at once in an Environment (connected, or dropped and inside its reconnect grace).
 * Call names are the Environment's to choose (`call:<anything>`), so nothing else bounds how many rooms, each with its
 * router on this node, one person can open: one connection per person would, but a connection that moves to another
 * call leaves the member of the last one in its grace (up to 120 s) with the room's router alive. A person is in one
 * call at a time; the rest is room to hang up and call again, or to switch calls, while an old one's grace runs.
 * Spaces need no such bound: they are configured (at most 64 per Environment).
 */
export const DIRECT_CALLS_PER_PERSON = 4;

export interface MediaRoomsDeps {
  readonly host: ActorHost;
  readonly clock: Clock;
  /** The pool of this node, started on first use so a server that never hosts media never starts a worker. */
  readonly pool: () => Promise<MediaWorkerPool>;
  readonly target: (environmentId: string, scope: string) => Promise<RoomTarget | undefined>;
  /** Asks the Environment backend (the space's `roleAuthorityUrl`); any failure is a denial. */
  readonly authorizePublisher: (url: string, request: PublisherQuestion) => Promise<{ allowed: boolean; reason: string }>;
  readonly logger: Logger;
  readonly listenIp?: string;
  readonly announcedAddress?: string;
  readonly consumerBudget?: number;
  /**
   * How long this node vouches for the connections it serves in a room (renewed every third of it): a room whose node
   * died without saying so drops their members (grace) once it lapses. Default HOSTING_TTL_MS.
   */
  readonly hostingTtlMs?: number;
  /** Default DIRECT_CALLS_PER_PERSON. */
  readonly callsPerPerson?: number;
  /** Default ROOM_STATE_INTERVAL_MS. */
  readonly stateIntervalMs?: number;
  /** What one message to a member may take, in bytes of its frame in any codec; room views are paged to fit. Default MEDIA_LIMITS.maxMessageBytes. */
  readonly maxMessageBytes?: number;
}

export interface PublisherQuestion {
  readonly grant: string;
  readonly scopes: readonly string[];
  readonly environmentId: string;
  readonly scope: string;
  readonly actorId: string;
  readonly source: MediaSource;
}

/** What this node holds for a room while members are connected to it here. */
interface LiveRoom {
  readonly key: string;
  readonly media: RoomMedia;
  /** The joined connection of each member on this node. */
  readonly members: Map<string, MediaConnection>;
  /** Connections whose `member.join` is on its way: the room may already hold them connected, so they are vouched for. */
  readonly joining: Set<string>;
  readonly producers: Map<string, { readonly memberId: string; readonly kind: types.MediaKind; readonly source: MediaSource }>;
  /**
   * Producers made whose right to publish is being checked again, not yet announced (`producer.added`): a join answer
   * does not list them, since a refusal takes them back without `producer.removed` to anyone.
   */
  readonly unconfirmed: Set<string>;
  readonly rtpCapabilities: Map<string, types.RtpCapabilities>;
  /**
   * The policy the room actor holds: the configured one when it opened the room, or the one it kept because members
   * were still in it (a configuration change applies once a room empties).
   */
  readonly policy: RoomPolicy;
  /** Highest revision broadcast or waiting to be, so a late view never overwrites a newer one. */
  revision: number;
  /**
   * The newest room state whose changes were applied here. A join installs its connection a step after the room
   * applied it; a leave the room applied after the join may have been applied here in between.
   */
  applied: MediaRoomContext | null;
  /** The newest view: every member is sent it before anything else (see ROOM_STATE_INTERVAL_MS). */
  view: RoomView | null;
  /** `view` as the messages that carry it (`room.state` and its pages), made when first sent. */
  viewMessages: readonly RoomStateMessage[] | null;
  /** Whether `view` still waits for the end of the interval to go to every member. */
  viewPending: boolean;
  /** When the last view went to every member (clock ms). */
  lastViewAt: number;
  /** Sends `view` at the end of the interval. */
  viewTimer: TimerHandle | undefined;
}

const REQUEST_SPEAK_SCOPE = 'media:request-speak';

const REQUEST_SCOPE: Partial<Record<RoomRequestMessage['type'], string>> = {
  'hand.raise': REQUEST_SPEAK_SCOPE,
  'speaker.accept': REQUEST_SPEAK_SCOPE,
  'floor.take': REQUEST_SPEAK_SCOPE,
  produce: PUBLISH_SCOPE,
  // The share is the room's one place to publish a screen: a grant that can never publish must not hold it.
  'screen.start': PUBLISH_SCOPE,
};

const MEDIA_ERROR_CODES: Readonly<Record<MediaError['code'], string>> = {
  room_closed: 'media_unavailable',
  media_unavailable: 'media_unavailable',
  peer_not_found: 'transport_not_found',
  transport_not_found: 'transport_not_found',
  already_connected: 'transport_already_connected',
  wrong_direction: 'transport_wrong_direction',
  producer_not_found: 'producer_not_found',
  producer_exists: 'producer_exists',
  consumer_not_found: 'consumer_not_found',
  invalid_source: 'invalid_media_parameters',
  invalid_parameters: 'invalid_media_parameters',
  transport_limit: 'transport_limit',
  cannot_consume: 'cannot_consume',
};

/**
 * The Media control plane's rooms on this node: each request of a connection goes to the room actor (the authority on
 * membership, seats, hands, offers and screen share) and then to the room's mediasoup resources, which follow what
 * the actor decided. Committed changes are broadcast as the whole room view (at most one per room per
 * ROOM_STATE_INTERVAL_MS); media that lost its right to flow
 * (a seat freed, a share stopped, a member gone) is closed here.
 */
export class MediaRooms implements MediaRoomsPort {
  readonly #deps: MediaRoomsDeps;
  readonly #live = new Map<string, LiveRoom>();
  readonly #opening = new Map<string, Promise<LiveRoom>>();
  readonly #hostingTtlMs: number;
  readonly #callsPerPerson: number;
  /**
   * The direct-call rooms each person (`<environmentId> <memberId>`) is in on this node, for DIRECT_CALLS_PER_PERSON:
   * a place is taken when a join is about to open or enter a call, and given back when the room says the member left
   * (or the join was refused). In memory: the routers it bounds are this node's, and die with the process; a room
   * whose members a crashed process left behind drops them when it opens again here.
   */
  readonly #calls = new Map<string, Set<string>>();
  readonly #stateIntervalMs: number;
  readonly #maxMessageBytes: number;
  /** The revision of the newest view each connection was sent. */
  readonly #viewSent = new WeakMap<MediaConnection, number>();
  #renewal: TimerHandle | undefined;

  constructor(deps: MediaRoomsDeps) {
    this.#deps = deps;
    this.#hostingTtlMs = deps.hostingTtlMs ?? HOSTING_TTL_MS;
    this.#callsPerPerson = deps.callsPerPerson ?? DIRECT_CALLS_PER_PERSON;
    this.#stateIntervalMs = deps.stateIntervalMs ?? ROOM_STATE_INTERVAL_MS;
    this.#maxMessageBytes = deps.maxMessageBytes ?? MEDIA_LIMITS.maxMessageBytes;
    this.#scheduleRenewal();
  }

  /** Every third of the hosting TTL, each room with connections here is vouched for again; a failure waits for the next. */
  #scheduleRenewal(): void {
    this.#renewal = this.#deps.clock.setTimeout(() => {
      for (const live of this.#live.values()) {
        if (live.members.size === 0 && live.joining.size === 0) continue;
        const connectionIds = [...[...live.members.values()].map((c) => c.id), ...live.joining];
        this.#send(live, { type: 'room.hosting', ttlMs: this.#hostingTtlMs, connectionIds }).catch((err: unknown) =>
          this.#deps.logger.warn({ err, roomId: live.key }, 'media room hosting renewal failed; retrying next round'),
        );
      }
      this.#scheduleRenewal();
    }, Math.max(1, Math.floor(this.#hostingTtlMs / 3)));
  }

  async admits(environmentId: string, scope: string): Promise<boolean> {
    return (await this.#deps.target(environmentId, scope)) !== undefined;
  }

  /** After the commit of a change no request caused (a grace ended, an offer expired). */
  readonly changedByDeadline = (change: DeadlineChange): void => {
    const live = this.#live.get(change.roomId);
    if (!live) {
      this.#leftCalls(change.roomId, change.changes);
      return;
    }
    void this.#readState(change.roomId).then(
      (context) => this.#applyChanges(live, change.changes, context),
      (err: unknown) => this.#deps.logger.warn({ err, roomId: change.roomId }, 'media room state read after a deadline failed'),
    );
  };

  async request(conn: MediaConnection, message: RoomRequestMessage): Promise<Record<string, unknown>> {
    const needed = REQUEST_SCOPE[message.type];
    if (needed && !conn.user.grant.scopes.includes(needed)) throw new MediaRequestError('scope_missing', `this request needs grant scope ${needed}`);
    const memberId = conn.user.memberId;
    try {
      return await this.#handle(conn, message);
    } finally {
      // The view of the request's own change goes before its response (the socket sends it once this returns).
      const live = this.#live.get(conn.user.roomKey);
      if (live && live.members.get(memberId) === conn) this.#catchUp(live, conn);
    }
  }

  async #handle(conn: MediaConnection, message: RoomRequestMessage): Promise<Record<string, unknown>> {
    const memberId = conn.user.memberId;
    try {
      if (message.type === 'room.join') {
        return await this.#join(conn, clientMediaParameters<types.RtpCapabilities>('rtpCapabilities', message.rtpCapabilities, validateAndNormalizeRtpCapabilities));
      }
      const live = this.#joined(conn);
      switch (message.type) {
        case 'room.leave':
          await this.#send(live, { type: 'member.leave', memberId });
          return {};
        case 'transport.create': {
          const params = await live.media.createTransport(memberId, message.direction);
          if (live.members.get(memberId) !== conn) {
            // The connection closed (or was replaced) while the transport was made: its media went with it, and so
            // must this transport, which nobody will ever connect (with the peer it re-created, if nobody serves it).
            if (live.members.has(memberId)) live.media.closeTransport(memberId, params.id);
            else live.media.removePeer(memberId);
            throw new MediaRequestError('not_joined', 'the connection closed while its transport was created');
          }
          return { transportId: params.id, iceParameters: params.iceParameters, iceCandidates: params.iceCandidates, dtlsParameters: params.dtlsParameters };
        }
        case 'transport.connect':
          await live.media.connectTransport(memberId, message.transportId, message.dtlsParameters as unknown as types.DtlsParameters);
          return {};
        case 'produce':
          return await this.#produce(conn, live, message);
        case 'producer.close':
          live.media.closeProducer(memberId, message.producerId);
          return {};
        case 'consume': {
          const caps = live.rtpCapabilities.get(memberId);
          if (!caps) throw new MediaRequestError('not_joined', 'join first');
          const consumer = await live.media.consume(memberId, message.transportId, message.producerId, caps);
          return { consumerId: consumer.id, producerId: consumer.producerId, kind: consumer.kind, rtpParameters: consumer.rtpParameters };
        }
        case 'consumer.resume':
          await live.media.resumeConsumer(memberId, message.consumerId);
          return {};
        case 'e2ee.key': {
          if (live.media.encryption !== 'sfu_blind') throw new MediaRequestError('e2ee_not_used', 'key envelopes are relayed only in sfu_blind rooms');
          const to = live.members.get(message.to);
          if (!to) throw new MediaRequestError('target_not_connected', `${message.to} is not connected`);
          this.#catchUp(live, to);
          to.send({ type: 'e2ee.key', from: memberId, envelope: message.envelope });
          return {};
        }
        case 'screen.start': {
          const { answer: reply } = await this.#send(live, { type: 'screen.start', memberId });
          const hint = screenEncodingHint(reply.request === 'screen.start' ? reply.screenProfile : undefined);
          return { screenProfile: hint.profile, encodings: hint.encodings, codecOptions: hint.codecOptions, contentHint: hint.contentHint, degradationPreference: hint.degradationPreference };
        }
        case 'hand.dismiss':
        case 'speaker.offer':
        case 'speaker.revoke':
          await this.#send(live, { type: message.type, memberId, target: message.target });
          return {};
        default:
          await this.#send(live, { type: message.type, memberId });
          return {};
      }
    } catch (error) {
      if (error instanceof MediaError) throw new MediaRequestError(MEDIA_ERROR_CODES[error.code], error.message);
      // mediasoup's own refusal of parameters it validated but cannot serve (a codec the room's router lacks).
      if (error instanceof Error && error.name === 'UnsupportedError') throw new MediaRequestError('invalid_media_parameters', error.message);
      if (error instanceof Error && !(error instanceof MediaRequestError) && /rtpParameters|dtlsParameters|rtpCapabilities|invalid/i.test(error.message) && error.name === 'TypeError') {
        throw new MediaRequestError('invalid_media_parameters', error.message);
      }
      throw error;
    }
  }

  disconnected(conn: MediaConnection): void {
    const live = this.#live.get(conn.user.roomKey);
    if (!live || live.members.get(conn.user.memberId) !== conn) return;
    live.members.delete(conn.user.memberId);
    live.rtpCapabilities.delete(conn.user.memberId);
    live.media.removePeer(conn.user.memberId);
    this.#send(live, { type: 'member.drop', memberId: conn.user.memberId, connectionId: conn.id }).catch((err: unknown) =>
      this.#deps.logger.warn({ err, roomId: live.key }, 'media member drop was not recorded; the member stays connected in the room until it leaves'),
    );
  }

  async close(): Promise<void> {
    if (this.#renewal) this.#deps.clock.clearTimeout(this.#renewal);
    this.#renewal = undefined;
    for (const live of this.#live.values()) {
      this.#dropViews(live);
      live.media.close();
    }
    this.#live.clear();
    this.#calls.clear();
  }

  async #join(conn: MediaConnection, rtpCapabilities: types.RtpCapabilities): Promise<Record<string, unknown>> {
    const { grant, scope } = conn.user;
    const target = await this.#deps.target(grant.environmentId, scope);
    if (!target) throw new MediaRequestError('media_scope_unknown', 'the space is no longer configured');
    const scopeNeeded = target.kind === 'space' ? 'media:join-space' : 'media:direct-call';
    if (!grant.scopes.includes(scopeNeeded)) throw new MediaRequestError('scope_missing', `joining needs grant scope ${scopeNeeded}`);
    if (target.violations.length > 0) throw new MediaRequestError('policy_invalid', `the space policy fails the Media policy check: ${target.violations.join('; ')}`);
    // Before the room actor or its router exists: the place is what lets this join create them.
    const placeTaken = target.kind === 'call' && this.#takeCallPlace(grant.environmentId, conn.user.memberId, conn.user.roomKey);
    try {
      // A second attempt only after a `room_not_open` from a LiveRoom nobody was in: its room was retired meanwhile.
      let retired = false;
      let reopened = 0;
      for (;;) {
        const live = await this.#liveRoom(conn.user.roomKey, target.policy);
        if (live.media.closed || this.#live.get(live.key) !== live) {
          // The last member left while the lookup answered, and its leave closed the room's media here before this
          // join was counted in `joining` (which keeps it open from then on): open the room again. Bounded, though
          // only a process closing all its rooms can close a fresh one that fast.
          if (++reopened > 2) throw new MediaRequestError('media_unavailable', 'the room closed while joining; try again');
          continue;
        }
        live.joining.add(conn.id);
        try {
          const admitted = await this.#admit(live, conn, rtpCapabilities);
          // In the call now, whatever gave its place back while the join was on its way (the removal, at the end of an
          // earlier grace, of the membership this join replaces): the place is held again.
          if (target.kind === 'call') this.#holdCallPlace(grant.environmentId, conn.user.memberId, conn.user.roomKey);
          return admitted;
        } catch (error) {
          const forgotten = this.#forgetUnused(live, conn.id);
          if (forgotten && !retired && error instanceof MediaRequestError && error.code === 'room_not_open') {
            retired = true;
            continue;
          }
          throw error;
        } finally {
          live.joining.delete(conn.id);
        }
      }
    } catch (error) {
      // Refused, or the room could not open: the member is not in the call. `not_joined` here means it was admitted
      // and dropped (its connection closed meanwhile): it is in the call for its grace, and the place goes when it leaves.
      if (placeTaken && !(error instanceof MediaRequestError && error.code === 'not_joined')) this.#giveBackCallPlace(conn.user.roomKey, conn.user.memberId);
      throw error;
    }
  }

  /**
   * After a failed join: a LiveRoom that nobody is in or joining goes with its media, so the next join opens the room
   * actor again. Kept, it would outlive a retirement of its empty room (which then loads unopened), and every later
   * join on this node would skip `room.open` and be refused `room_not_open`.
   */
  #forgetUnused(live: LiveRoom, joining: string): boolean {
    if (live.members.size > 0 || live.joining.size !== 1 || !live.joining.has(joining) || this.#live.get(live.key) !== live) return false;
    this.#dropViews(live);
    live.media.close();
    this.#live.delete(live.key);
    return true;
  }

  /**
   * Takes a place among the person's direct calls for `roomKey`; false when it already holds one there (a rejoin or a
   * resume). Refuses `direct_call_limit` when the person is in DIRECT_CALLS_PER_PERSON calls already.
   */
  #takeCallPlace(environmentId: string, memberId: string, roomKey: string): boolean {
    const person = `${environmentId} ${memberId}`;
    const calls = this.#calls.get(person) ?? new Set<string>();
    if (calls.has(roomKey)) return false;
    if (calls.size >= this.#callsPerPerson) {
      throw new MediaRequestError(
        'direct_call_limit',
        `already in ${this.#callsPerPerson} direct calls (counting those left without room.leave, until their reconnect grace ends): leave one first`,
      );
    }
    calls.add(roomKey);
    this.#calls.set(person, calls);
    return true;
  }

  /** Records the person's place in the call `roomKey` is, without the limit: for a member the room has just admitted. */
  #holdCallPlace(environmentId: string, memberId: string, roomKey: string): void {
    const person = `${environmentId} ${memberId}`;
    const calls = this.#calls.get(person) ?? new Set<string>();
    calls.add(roomKey);
    this.#calls.set(person, calls);
  }

  #giveBackCallPlace(roomKey: string, memberId: string): void {
    const person = `${roomKey.slice(0, roomKey.indexOf('.'))} ${memberId}`;
    const calls = this.#calls.get(person);
    if (!calls?.delete(roomKey)) return;
    if (calls.size === 0) this.#calls.delete(person);
  }

  /** Members the room says left give their call place back (a space's members hold none: nothing to give). */
  #leftCalls(roomKey: string, changes: readonly RoomChange[]): void {
    for (const change of changes) if (change.kind === 'member.left') this.#giveBackCallPlace(roomKey, change.memberId);
  }

  /** The join itself, once the room is live here; the connection is vouched for while it runs (see `joining`). */
  async #admit(live: LiveRoom, conn: MediaConnection, rtpCapabilities: types.RtpCapabilities): Promise<Record<string, unknown>> {
    const { memberId } = conn.user;
    // Read before the room admits the member: while a dead worker's replacement starts there are none (the main router
    // is gone: media_unavailable), and a join refused after the room admitted it would leave the member in the room
    // (connected, maybe seated, its requests served) while telling it that it is not. A rebuilt main router has the
    // same codecs, so these stay the room's.
    const routerRtpCapabilities = live.media.rtpCapabilities;
    const joined = await this.#send(live, this.#joinRequest(conn));
    const reply = joined.answer;
    let context = joined.context;
    if (reply.request === 'member.join' && reply.seat !== null && !conn.user.grant.scopes.includes(REQUEST_SPEAK_SCOPE)) {
      // Resumed with the seat it kept, on a grant without media:request-speak (connecting again is how a grant is
      // narrowed): a seat is only taken under that scope, so the member gives it up before this connection can publish,
      // rather than speak and keep a speaker out under a grant that could never have taken it. A request of its own,
      // not a change of the join's rule, so joins already journaled replay as they were decided.
      ({ context } = await this.#send(live, { type: 'floor.release', memberId }));
    }
    if (conn.closed) {
      // The socket closed while the room admitted it, so `disconnected` found nothing to drop. If a newer connection
      // of the person joined meanwhile, this late join took the member from it: it joins again. Otherwise the member
      // is dropped now, or it would stay connected (holding its place and seat) with no connection and no grace.
      const newer = live.members.get(memberId);
      if (newer && newer !== conn && !newer.closed) await this.#send(live, this.#joinRequest(newer));
      else await this.#send(live, { type: 'member.drop', memberId, connectionId: conn.id });
      throw new MediaRequestError('not_joined', 'the connection closed while joining');
    }
    const newest = live.applied;
    if (newest && newest.revision > context.revision && !newest.members.some((m) => m.memberId === memberId && m.connectionId === conn.id)) {
      // A later change the room applied took this connection out (its own room.leave sent right behind the join, or
      // the leave of a connection this one replaced): installed now, it would be served media the room does not grant.
      throw new MediaRequestError('not_joined', 'the member left the room before this join completed');
    }
    const previous = live.members.get(memberId);
    if (previous && previous !== conn) {
      live.media.removePeer(memberId);
      previous.close();
    }
    live.members.set(memberId, conn);
    live.rtpCapabilities.set(memberId, rtpCapabilities);
    const view = mediaRoomView(context);
    // The view of the join (or a newer one) goes before the answer, in pages: a full stage's is over any one message.
    this.#offerView(live, view);
    this.#catchUp(live, conn);
    return {
      routerRtpCapabilities,
      self: view?.members.find((m) => m.memberId === memberId) ?? null,
      revision: view?.revision ?? null,
      // A producer still being checked reaches this member as `producer.added` once confirmed: it is a member by then.
      producers: [...live.producers].filter(([producerId, p]) => p.memberId !== memberId && !live.unconfirmed.has(producerId)).map(([producerId, p]) => ({ producerId, ...p })),
      resumed: reply.request === 'member.join' ? reply.resumed : false,
      encryption: live.policy.encryption,
      e2ee: live.policy.encryption === 'sfu_blind',
    };
  }

  #joinRequest(conn: MediaConnection): Extract<Without<MediaRoomRequest, 'at'>, { type: 'member.join' }> {
    const { grant, memberId } = conn.user;
    return {
      type: 'member.join',
      memberId,
      // No profile service yet: a label that names nobody beyond the Environment's own pairwise id.
      displayName: `Member ${memberId.slice(-6)}`,
      guest: false,
      moderator: grant.environmentRoles.includes('admin'),
      maySpeak: grant.scopes.includes(REQUEST_SPEAK_SCOPE),
      connectionId: conn.id,
      hostingTtlMs: this.#hostingTtlMs,
    };
  }

  async #produce(conn: MediaConnection, live: LiveRoom, message: Extract<MediaV2ClientMessage, { type: 'produce' }>): Promise<Record<string, unknown>> {
    const { memberId, grant, scope } = conn.user;
    const rtpParameters = clientMediaParameters<types.RtpParameters>('rtpParameters', message.rtpParameters, (value) => {
      validateAndNormalizeRtpParameters(value);
      assertServable(value);
    });
    // Refused again where the producer is made (RoomMedia.produce); said here first so a refused request neither asks
    // the room nor makes a call to the Environment backend.
    if (live.media.publishes(memberId, message.source)) throw new MediaRequestError('producer_exists', `you already publish your ${message.source}: close that producer first`);
    const { answer: check } = await this.#send(live, { type: 'publish.check', memberId, source: message.source });
    if (check.request === 'publish.check' && !check.allowed) {
      throw new MediaRequestError(check.denial ?? 'not_speaker', message.source === 'microphone' ? 'publishing the microphone needs a speaker seat' : 'publishing the screen needs to be the sharer');
    }
    const url = live.policy.roleAuthorityUrl;
    if (url) {
      const decision = await this.#deps.authorizePublisher(url, { grant: conn.user.grantToken, scopes: grant.scopes, environmentId: grant.environmentId, scope, actorId: memberId, source: message.source });
      if (!decision.allowed) throw new MediaRequestError('publisher_denied', `the Environment backend did not allow publishing (${decision.reason})`);
    }
    const producer = await live.media.produce(memberId, message.transportId, {
      kind: message.kind,
      rtpParameters,
      appData: { source: message.source },
    });
    // The right to publish may have ended while the authority was asked and the producer made (a seat released or
    // revoked, a share stopped). Known to the room from here on, the producer is closed by any such change applied
    // later; the second check covers every change applied before.
    live.producers.set(producer.id, { memberId, kind: message.kind, source: message.source });
    live.unconfirmed.add(producer.id);
    const withdraw = (): void => {
      live.producers.delete(producer.id);
      this.#closeProducer(live, memberId, producer.id);
    };
    // A producer gone with its worker meanwhile is lost media, not a right that ended: the member is told media.reset,
    // and the answer must say the same (media_unavailable), or the client would stop trying to publish.
    let workerLost = false;
    const onClosed = (closed: ProducerClosed): void => {
      if (closed.producerId === producer.id && closed.workerLost) workerLost = true;
    };
    live.media.on('producerclosed', onClosed);
    let recheck: MediaRoomReply;
    try {
      ({ answer: recheck } = await this.#send(live, { type: 'publish.check', memberId, source: message.source }));
    } catch (error) {
      // Refused (the member left meanwhile) or unanswered: a producer nobody vouches for does not stay.
      withdraw();
      throw error;
    } finally {
      live.unconfirmed.delete(producer.id);
      live.media.off('producerclosed', onClosed);
    }
    if (workerLost) {
      withdraw();
      throw new MediaRequestError('media_unavailable', 'the media worker was lost while the producer was made; make your media again');
    }
    if (!live.producers.has(producer.id) || (recheck.request === 'publish.check' && !recheck.allowed)) {
      withdraw();
      throw new MediaRequestError(recheck.request === 'publish.check' ? (recheck.denial ?? 'not_speaker') : 'not_speaker', 'the right to publish ended while the producer was made');
    }
    this.#broadcast(live, { type: 'producer.added', producer: { producerId: producer.id, memberId, kind: message.kind, source: message.source } }, memberId);
    return { producerId: producer.id };
  }

  #joined(conn: MediaConnection): LiveRoom {
    const live = this.#live.get(conn.user.roomKey);
    if (!live || live.members.get(conn.user.memberId) !== conn) throw new MediaRequestError('not_joined', 'send room.join first');
    return live;
  }

  async #liveRoom(key: string, policy: RoomPolicy): Promise<LiveRoom> {
    const existing = this.#live.get(key);
    if (existing && !existing.media.closed) return existing;
    let opening = this.#opening.get(key);
    if (!opening) {
      opening = this.#openRoom(key, policy).finally(() => this.#opening.delete(key));
      this.#opening.set(key, opening);
    }
    return opening;
  }

  /** Opens the room actor (once per life of the room on this node), then its media under the policy the actor holds. */
  async #openRoom(key: string, configured: RoomPolicy): Promise<LiveRoom> {
    const opened = await this.#ask(key, { type: 'room.open', policy: configured });
    const refused = opened.emitted.find((e) => e.type === 'room.refused');
    // policy_changed: members (dropped ones inside their grace) are still in the room, which keeps its policy.
    if (refused && refused.code !== 'policy_changed') throw new MediaRequestError(refused.code, refused.message);
    const policy = opened.context.policy ?? configured;
    // This node serves none of the room's connections yet: members it holds as connected lost theirs with an earlier
    // process (a crash gave no chance to say so), and their grace starts now. Joins wait for this opening.
    const hosted = await this.#ask(key, { type: 'room.hosting', ttlMs: this.#hostingTtlMs, connectionIds: [] });
    const dropped = hosted.emitted.find((e) => e.type === 'room.reply' && e.request === 'room.hosting');
    if (dropped?.type === 'room.reply' && dropped.request === 'room.hosting' && dropped.dropped > 0) {
      this.#deps.logger.info({ roomId: key, dropped: dropped.dropped }, 'media room members of an earlier process dropped');
    }
    let pool: MediaWorkerPool;
    try {
      pool = await this.#deps.pool();
    } catch (err) {
      this.#deps.logger.error({ err }, 'the mediasoup worker pool could not start');
      throw new MediaRequestError('media_unavailable', 'this node cannot host media right now');
    }
    let media: RoomMedia;
    try {
      media = await RoomMedia.create({
        pool,
        roomId: key,
        encryption: policy.encryption,
        expectedConsumersPerRecvTransport: policy.maxSpeakerSeats + (policy.screenShare === 'disabled' ? 0 : 1),
        logger: this.#deps.logger,
        ...(this.#deps.listenIp ? { listenIp: this.#deps.listenIp } : {}),
        ...(this.#deps.announcedAddress ? { announcedAddress: this.#deps.announcedAddress } : {}),
        ...(this.#deps.consumerBudget ? { consumerBudget: this.#deps.consumerBudget } : {}),
      });
    } catch (err) {
      // No live worker to place the room on (the pool closed, or lost a worker it could not replace). A loss is logged
      // once by the pool, as an error: a join it refuses is a warning, not another error for every attempt.
      const level = isWorkerLoss(err, pool) ? 'warn' : 'error';
      this.#deps.logger[level]({ err, roomId: key }, 'media room could not be placed on a worker');
      throw new MediaRequestError('media_unavailable', 'this node cannot host media right now');
    }
    const live: LiveRoom = {
      key,
      media,
      policy,
      members: new Map(),
      joining: new Set(),
      producers: new Map(),
      unconfirmed: new Set(),
      rtpCapabilities: new Map(),
      revision: -1,
      applied: null,
      view: null,
      viewMessages: null,
      viewPending: false,
      lastViewAt: Number.NEGATIVE_INFINITY,
      viewTimer: undefined,
    };
    media.on('producerclosed', (closed) => {
      // Once per producer, whether its close or a lost worker (below) told first.
      if (live.producers.delete(closed.producerId)) this.#broadcast(live, { type: 'producer.removed', producerId: closed.producerId });
    });
    media.on('medialost', (lost) => {
      for (const peerId of lost.peerIds) {
        const conn = live.members.get(peerId);
        if (!conn) continue;
        this.#catchUp(live, conn);
        conn.send({ type: 'media.reset', reason: 'worker_lost' });
      }
      for (const [producerId, p] of live.producers) {
        if (lost.peerIds.includes(p.memberId)) {
          live.producers.delete(producerId);
          this.#broadcast(live, { type: 'producer.removed', producerId });
        }
      }
    });
    media.on('mediarestored', () => {
      // Told media.reset when the loss left no main router, or refused media_unavailable since: now it can be made.
      // Not members whose transports survived on other routers: a reset would have them make more than the limit.
      for (const [memberId, conn] of live.members) {
        if (live.media.hasTransports(memberId)) continue;
        this.#catchUp(live, conn);
        conn.send({ type: 'media.reset', reason: 'worker_lost' });
      }
    });
    this.#live.set(key, live);
    return live;
  }

  /** One event to the room actor: what it emitted and the context right after. */
  async #ask(key: string, request: Without<MediaRoomRequest, 'at'>): Promise<{ emitted: readonly MediaRoomEmitted[]; context: MediaRoomContext }> {
    const reply = await coordinated(() => this.#deps.host.send(MEDIA_ROOM_KIND, key, request));
    return { emitted: reply.emitted as readonly MediaRoomEmitted[], context: reply.snapshot.context as MediaRoomContext };
  }

  /** One request to the room actor: its reply, or its refusal as a MediaRequestError. Changes are applied and broadcast. */
  async #send(live: LiveRoom, request: Without<MediaRoomRequest, 'at'>): Promise<{ answer: MediaRoomReply; context: MediaRoomContext }> {
    const { emitted, context } = await this.#ask(live.key, request);
    const refused = emitted.find((e) => e.type === 'room.refused');
    const changed = emitted.find((e) => e.type === 'room.changed');
    if (changed) this.#applyChanges(live, changed.changes, context);
    if (refused) throw new MediaRequestError(refused.code, refused.message);
    const answer = emitted.find((e) => e.type === 'room.reply');
    if (!answer) throw new Error(`the media room answered ${request.type} with neither a reply nor a refusal`);
    return { answer, context };
  }

  async #readState(key: string): Promise<MediaRoomContext | undefined> {
    const view = await this.#deps.host.readCommitted(MEDIA_ROOM_KIND, key);
    return (view?.state as { context?: MediaRoomContext } | undefined)?.context;
  }

  /** Closes media that lost its right to flow and shows everyone the new view. */
  #applyChanges(live: LiveRoom, changes: readonly RoomChange[], context: MediaRoomContext | undefined): void {
    if (context && (live.applied === null || context.revision >= live.applied.revision)) live.applied = context;
    for (const change of changes) {
      if (change.kind === 'seat.freed') this.#closeProducers(live, change.memberId, 'microphone');
      else if (change.kind === 'screen.stopped') this.#closeProducers(live, change.memberId, 'screen');
      else if (change.kind === 'member.dropped') {
        // Only a lapsed hosting deadline drops a member whose connection is still open here (renewals failed for a
        // whole TTL): it joins again at once and keeps what a resume keeps.
        const conn = live.members.get(change.memberId);
        if (conn && conn.id === change.connectionId && !conn.closed) {
          this.#send(live, this.#joinRequest(conn)).catch((err: unknown) =>
            this.#deps.logger.warn({ err, roomId: live.key }, 'media member could not rejoin after its hosting lapsed'),
          );
        }
      } else if (change.kind === 'member.left') {
        const conn = live.members.get(change.memberId);
        // The removal names the connection the member was lost with. A deadline's change is applied only after the
        // room is read again, and the member may have joined again meanwhile (a fresh member, on a new connection):
        // that membership, its connection, its media and its call place are not the ones that ended.
        if ((conn && conn.id !== change.connectionId) || context?.members.some((m) => m.memberId === change.memberId)) continue;
        this.#giveBackCallPlace(live.key, change.memberId);
        live.media.removePeer(change.memberId);
        live.members.delete(change.memberId);
        live.rtpCapabilities.delete(change.memberId);
        if (conn && change.reason !== 'left') {
          conn.send({ type: 'session.ended', reason: 'removed' });
          conn.close(4403, 'removed');
        }
      }
    }
    if (context) this.#offerView(live, mediaRoomView(context));
    // The last member gone (left, or its grace ended): this node's media for the room goes; the actor stays. Not while
    // a join is on its way here, or was admitted after the state this change read (the actor may already hold that
    // member): its answer and connection need this LiveRoom, and a join that fails forgets it (#forgetUnused).
    if (context && context.members.length === 0 && changes.some((c) => c.kind === 'member.left') && live.members.size === 0 && live.joining.size === 0) {
      this.#dropViews(live);
      live.media.close();
      if (this.#live.get(live.key) === live) this.#live.delete(live.key);
    }
  }

  #closeProducers(live: LiveRoom, memberId: string, source: MediaSource): void {
    for (const [producerId, p] of live.producers) {
      if (p.memberId === memberId && p.source === source) this.#closeProducer(live, memberId, producerId);
    }
  }

  /** Closes one producer; one already gone (with its peer or transport) is skipped. */
  #closeProducer(live: LiveRoom, memberId: string, producerId: string): void {
    try {
      live.media.closeProducer(memberId, producerId);
    } catch (error) {
      if (!(error instanceof MediaError)) throw error;
    }
  }

  /** Every member but `except` gets `message`, after the view it is owed. */
  #broadcast(live: LiveRoom, message: MediaV2ServerMessage, except?: string): void {
    this.#flushView(live);
    for (const [memberId, conn] of live.members) if (memberId !== except) conn.send(message);
  }

  /** A view read from the room: kept, and queued for every member, if it is newer than any before it. */
  #offerView(live: LiveRoom, view: RoomView | null): void {
    if (!view || view.revision <= live.revision) return;
    live.revision = view.revision;
    this.#queueView(live, view);
  }

  /** The room's newest view: sent now if none went out within the interval, otherwise at the interval's end. */
  #queueView(live: LiveRoom, view: RoomView): void {
    live.view = view;
    live.viewMessages = null;
    live.viewPending = true;
    if (live.viewTimer) return;
    const wait = live.lastViewAt + this.#stateIntervalMs - this.#deps.clock.now();
    if (wait <= 0) {
      this.#flushView(live);
      return;
    }
    live.viewTimer = this.#deps.clock.setTimeout(() => {
      live.viewTimer = undefined;
      this.#flushView(live);
    }, wait);
  }

  /** Sends the waiting view to every member that lacks it. */
  #flushView(live: LiveRoom): void {
    if (live.viewTimer) this.#deps.clock.clearTimeout(live.viewTimer);
    live.viewTimer = undefined;
    if (!live.viewPending) return;
    live.viewPending = false;
    live.lastViewAt = this.#deps.clock.now();
    for (const conn of live.members.values()) this.#sendView(live, conn);
  }

  /**
   * Before a message to one member: the newest view, if it lacks it (the others still get a waiting one at the
   * interval's end). A member that joined after the newest view went out gets it here too.
   */
  #catchUp(live: LiveRoom, conn: MediaConnection): void {
    this.#sendView(live, conn);
  }

  /** All the pages of the newest view, back to back, to a member that lacks it. */
  #sendView(live: LiveRoom, conn: MediaConnection): void {
    const view = live.view;
    if (!view || (this.#viewSent.get(conn) ?? -1) >= view.revision) return;
    this.#viewSent.set(conn, view.revision);
    live.viewMessages ??= roomStateMessages(view, this.#maxMessageBytes);
    for (const message of live.viewMessages) conn.send(message);
  }

  /** The room's media goes: nobody is left to see a waiting view. */
  #dropViews(live: LiveRoom): void {
    if (live.viewTimer) this.#deps.clock.clearTimeout(live.viewTimer);
    live.viewTimer = undefined;
    live.viewPending = false;
    live.view = null;
    live.viewMessages = null;
  }
}

/**
 * A client's mediasoup parameter object, checked by mediasoup's own validator (on a copy, which it normalises) before
 * it is used: a malformed one is the client's mistake, answered `invalid_media_parameters`, not a TypeError from
 * inside a transport or, for capabilities, from a later `consume`.
 */
function clientMediaParameters<T>(name: string, given: Readonly<Record<string, unknown>>, validate: (value: T) => void): T {
  const value = structuredClone(given) as unknown as T;
  try {
    validate(value);
  } catch (error) {
    throw new MediaRequestError('invalid_media_parameters', `${name}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return value;
}
