import type { Clock, TimerHandle } from '../../actors/clock.js';
import { MEDIA_PLUGIN_ID, MEDIA_CONTROL_COMPONENT } from '../../plugins/media/media.plugin.js';
import { coordinated } from '../../runtime/coordination.js';
import type { LivePluginGrant, PluginGrants } from '../../runtime/plugin-grants.js';
import type { RuntimeActivity } from '../../runtime/runtime-activity.js';
import { HttpError } from '../../transport/http/errors.js';
import { socketBearer } from '../../transport/ws/codecs.js';
import { defineWebSocketEndpoint, KeyedBudgets, type WebSocketEndpoint, type WsConnection } from '../../transport/ws/endpoint.js';
import {
  MEDIA_LIMITS,
  MEDIA_PROTOCOL_VERSION,
  MediaCloseCode,
  MediaV2ClientMessageSchema,
  type MediaV2ClientMessage,
  type MediaV2ServerMessage,
} from './media-control.messages.js';
import { ContextPlaces } from './context-places.js';

export const MEDIA_CONTROL_PATH = '/v1/plugins/media/control';
/** How often every open connection's grant is checked again, for what no event announces. */
export const GRANT_SWEEP_MS = 15_000;

/** A refusal of one request: answered on the request's `response`, the connection stays open. */
export class MediaRequestError extends Error {
  override readonly name = 'MediaRequestError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** One control connection of one member. `grant` moves forward on `grant.refresh`. */
export interface MediaConnectionUser {
  grant: LivePluginGrant;
  /** The grant as presented: forwarded to the Environment backend by the publisher-authority callback. */
  grantToken: string;
  readonly memberId: string;
  /** `<environmentId>.<scope>`: the room this connection is about. */
  readonly roomKey: string;
  readonly scope: string;
  /** Gives the member's place in the room back (maxParticipantsPerContext); only the first call counts. */
  readonly leave: () => void;
  unsubscribe?: () => void;
  expiry?: TimerHandle;
}

export type MediaConnection = WsConnection<MediaConnectionUser, MediaV2ServerMessage>;

/** What the socket asks of the rooms: answer one request, and hear that a connection went away. */
export interface MediaRoomsPort {
  /** Whether the scope names a room of this Environment (a configured space, or a call when direct calls are on). */
  admits(environmentId: string, scope: string): Promise<boolean>;
  /** The result of one room request; throws MediaRequestError to refuse it. */
  request(conn: MediaConnection, message: Exclude<MediaV2ClientMessage, { type: 'grant.refresh' | 'ping' }>): Promise<Record<string, unknown>>;
  /** The connection closed (dropped or replaced): the member keeps its place for the reconnect grace. */
  disconnected(conn: MediaConnection): void;
}

export interface MediaControlSocketDeps {
  readonly grants: PluginGrants;
  readonly activity: RuntimeActivity;
  readonly rooms: MediaRoomsPort;
  readonly clock: Clock;
  readonly limits?: Partial<typeof MEDIA_LIMITS>;
}

const refuse = (status: number, code: string, message: string): HttpError => new HttpError(status, code, message, { family: 'runtime' });

/**
 * The Media control plane's WebSocket (`wss://{rtc_url}/v1/plugins/media/control`). A connection is admitted with a
 * live Plugin Grant for the `control` component holding `media:connect`, from the grant's own origin, for a scope that
 * names a room of the Environment. It lives as long as the grant: the grant's expiry (unless refreshed), its
 * revocation, the end of its Runtime fence (supersession, release, lapse, logout) or of its sign-in (a device signed
 * out or removed), and a newer connection of the same person (maxConcurrentSessions 1) each close it with a
 * `session.ended` first. Limits: maxMessageBytes per message, each way (the client's over it is closed 1009; one of
 * ours over it is a bug, logged and never sent: room views go in pages), and requestsPerMinute per person, across
 * their reconnects (4029), maxParticipantsPerContext members per room (429 at upgrade: the check takes the place,
 * which the connection's close, or its upgrade abandoned before it opened, gives back).
 */
export function mediaControlSocket(deps: MediaControlSocketDeps): {
  endpoint: WebSocketEndpoint<MediaConnectionUser, MediaV2ClientMessage, MediaV2ServerMessage>;
  connections(): number;
  stop(): void;
} {
  const limits = { ...MEDIA_LIMITS, ...deps.limits };
  /** The one connection of each member (`<environmentId> <actorId>`). */
  const byMember = new Map<string, MediaConnection>();
  const places = new ContextPlaces(limits.maxParticipantsPerContext);
  const memberKey = (grant: LivePluginGrant): string => `${grant.environmentId} ${grant.actorId}`;
  /**
   * requestsPerMinute is the person's, keyed as their one connection is: a reconnect (which replaces the older
   * connection) draws from the same bucket, so it cannot buy a fresh 600. Bounded (the key handed out least recently
   * goes first when full).
   */
  const budgets = new KeyedBudgets(limits.requestsPerMinute);

  const end = (conn: MediaConnection, reason: 'replaced' | 'grant_expired' | 'grant_ended', code: number): void => {
    conn.send({ type: 'session.ended', reason });
    conn.close(code, reason);
  };

  const verify = async (token: string | undefined): Promise<LivePluginGrant | undefined> =>
    token ? coordinated(() => deps.grants.verify(token, MEDIA_PLUGIN_ID)) : undefined;

  const armExpiry = (conn: MediaConnection): void => {
    if (conn.user.expiry) deps.clock.clearTimeout(conn.user.expiry);
    conn.user.expiry = deps.clock.setTimeout(() => end(conn, 'grant_expired', MediaCloseCode.grantExpired), Math.max(0, conn.user.grant.expiresAt - deps.clock.now()));
  };

  const follow = (conn: MediaConnection): void => {
    conn.user.unsubscribe?.();
    const { grantId, sessionId } = conn.user.grant;
    const fromActivity = deps.activity.subscribe(sessionId, (event) => {
      // Anything but the session staying active under the grant's lease ends the grant.
      if (event.type === 'browser.signed_out' || event.status !== 'active' || event.leaseVersion !== conn.user.grant.leaseVersion) {
        end(conn, 'grant_ended', MediaCloseCode.grantEnded);
      }
    });
    const fromRevocation = deps.grants.onRevoked(grantId, () => end(conn, 'grant_ended', MediaCloseCode.grantEnded));
    // A device of the account signed out or was removed, or one of its sign-ins was revoked (a reused authorization
    // code): the sign-in behind the grant may have ended.
    const fromAccount = deps.activity.subscribeAccount(conn.user.grant.accountId, () => {
      stillHolds(conn).catch((err: unknown) => conn.logger.warn({ err }, 'media grant check failed; the sweep tries again'));
    });
    conn.user.unsubscribe = () => {
      fromActivity();
      fromRevocation();
      fromAccount();
    };
  };

  /**
   * Whether the connection's grant still holds, checked online as introspection does; a connection whose grant no
   * longer holds is ended. Events tell revocation and the fence's end at once, but not everything that ends a sign-in
   * (a device signed out or removed raises the account epoch), so every room request checks again, and so does a
   * sweep of idle connections (which may still be receiving media).
   */
  const stillHolds = async (conn: MediaConnection): Promise<boolean> => {
    const current = conn.user.grant;
    const fresh = await verify(conn.user.grantToken);
    if (conn.closed) return false;
    if (!fresh || fresh.grantId !== current.grantId) {
      end(conn, 'grant_ended', MediaCloseCode.grantEnded);
      return false;
    }
    return true;
  };
  let sweep: TimerHandle | undefined;
  const sweepAll = (): void => {
    // A replaced connection is closing already: the one of each member is every connection that needs checking.
    for (const conn of byMember.values()) {
      stillHolds(conn).catch((err: unknown) => conn.logger.warn({ err }, 'media grant check failed; retrying next round'));
    }
    sweep = deps.clock.setTimeout(sweepAll, GRANT_SWEEP_MS);
  };
  sweep = deps.clock.setTimeout(sweepAll, GRANT_SWEEP_MS);

  const endpoint = defineWebSocketEndpoint<MediaConnectionUser, MediaV2ClientMessage, MediaV2ServerMessage>({
    path: MEDIA_CONTROL_PATH,
    name: 'media-control',
    // The room and the member: never the grant, whose token the user also holds.
    logContext: (user) => ({ roomKey: user.roomKey, memberId: user.memberId }),
    maxMessageBytes: limits.maxMessageBytes,
    // The limit `hello` announces holds both ways: a client may set its WebSocket's maximum message size to it.
    maxOutboundMessageBytes: limits.maxMessageBytes,
    oversized(conn, message) {
      // A bug of ours (room views go in pages, and every other message is bounded): the request still gets its one
      // answer, a refusal with a request id the log line names.
      if (message.type !== 'response') return undefined;
      const requestId = conn.newRequestId();
      conn.logger.error({ requestId, id: message.id }, 'media response over maxMessageBytes answered internal_error');
      return { type: 'response', id: message.id, ok: false, error: { code: 'internal_error', message: 'the answer was too large to send; report the request id', requestId } };
    },
    maxBackpressureBytes: 1024 * 1024,
    idleTimeoutSeconds: 32,
    messagesPerMinute: limits.requestsPerMinute,
    messageBudget: (user) => budgets.budgetOf(memberKey(user.grant)),
    inbound: MediaV2ClientMessageSchema,
    takesBearer: true,
    errorMessage: (error) => ({ type: 'error', code: error.code, message: error.message, requestId: error.requestId, ...(error.details ? { details: [...error.details] } : {}) }),
    async authenticate(upgrade) {
      const grantToken = socketBearer(upgrade.headers);
      const grant = await verify(grantToken);
      if (!grant || grant.component !== MEDIA_CONTROL_COMPONENT) {
        throw refuse(401, 'media_grant_invalid', 'offer a live Media control Plugin Grant as the subprotocol registry.bearer.<grant>');
      }
      if (!grant.scopes.includes('media:connect')) throw refuse(403, 'media_scope_missing', 'the grant does not hold media:connect');
      if (upgrade.headers.origin !== grant.origin) throw refuse(403, 'media_origin_mismatch', 'the grant is bound to another origin');
      const scope = grant.context.scope;
      if (scope === undefined || !(await deps.rooms.admits(grant.environmentId, scope))) {
        throw refuse(404, 'media_scope_unknown', 'the grant names no space of this Environment, and no direct call it allows');
      }
      const roomKey = `${grant.environmentId}.${scope}`;
      // Taken here, with no await between the check and the taking: upgrades in flight together see each other.
      const leave = places.take(roomKey, memberKey(grant));
      if (!leave) throw refuse(429, 'media_context_full', `at most ${limits.maxParticipantsPerContext} members per context`);
      return { grant, grantToken: grantToken ?? '', memberId: grant.actorId, roomKey, scope, leave };
    },
    onAbandoned(user) {
      user.leave();
    },
    onOpen(conn) {
      const key = memberKey(conn.user.grant);
      const previous = byMember.get(key);
      byMember.set(key, conn);
      if (previous) end(previous, 'replaced', MediaCloseCode.replaced);
      follow(conn);
      armExpiry(conn);
      conn.send({
        type: 'hello',
        protocol: MEDIA_PROTOCOL_VERSION,
        memberId: conn.user.memberId,
        scope: conn.user.scope,
        grantExpiresAt: new Date(conn.user.grant.expiresAt).toISOString(),
        limits: { maxMessageBytes: limits.maxMessageBytes, requestsPerMinute: limits.requestsPerMinute },
      });
      // The upgrade verified the grant before `follow` listened: an end told in between (a release, a supersession, a
      // revocation, a sign-in ended) reached no listener of this connection, which would live on until its next room
      // request or the sweep. Now that it listens, one more check catches what was told before.
      stillHolds(conn).catch((err: unknown) => conn.logger.warn({ err }, 'media grant check after the upgrade failed; the sweep tries again'));
    },
    async onMessage(conn, message) {
      const answer = (result: Record<string, unknown>): void => void conn.send({ type: 'response', id: message.id, ok: true, result });
      const fail = (code: string, text: string, err?: unknown): void => {
        const requestId = conn.newRequestId();
        // A refusal is the client's doing (debug, as the gateway's): up to requestsPerMinute a connection otherwise.
        if (err === undefined) conn.logger.debug({ requestId, code, request: message.type }, 'media request refused');
        else conn.logger.error({ requestId, err, request: message.type }, 'media request failed');
        conn.send({ type: 'response', id: message.id, ok: false, error: { code, message: text, requestId } });
      };
      try {
        if (message.type === 'ping') return answer({});
        if (message.type === 'grant.refresh') {
          const fresh = await verify(message.grant);
          // Closed meanwhile: onClose has dropped the connection's subscriptions and timer; following it again would leak them.
          if (conn.closed) return;
          const current = conn.user.grant;
          // Every scope the connection holds, kept: what the connection made under a scope (a producer under
          // media:publish) must not outlive the grant that carried it, and a narrower grant would leave it running.
          if (
            !fresh ||
            fresh.component !== MEDIA_CONTROL_COMPONENT ||
            !current.scopes.every((scope) => fresh.scopes.includes(scope)) ||
            fresh.environmentId !== current.environmentId ||
            fresh.actorId !== current.actorId ||
            fresh.context.scope !== current.context.scope ||
            fresh.origin !== current.origin
          ) {
            return fail('media_grant_invalid', 'the new grant must be live, be for the same person, Environment, origin and scope, and hold every scope of the current one (to narrow, connect again with the narrower grant)');
          }
          conn.user.grant = fresh;
          conn.user.grantToken = message.grant;
          follow(conn);
          armExpiry(conn);
          answer({ grantExpiresAt: new Date(fresh.expiresAt).toISOString() });
          // As at the upgrade: the new grant was verified before `follow` listened for it, so an end told in between
          // (its revocation, above all) reached no listener of this connection. One more check catches it.
          stillHolds(conn).catch((err: unknown) => conn.logger.warn({ err }, 'media grant check after grant.refresh failed; the sweep tries again'));
          return;
        }
        if (conn.closed || !(await stillHolds(conn))) return;
        answer(await deps.rooms.request(conn, message));
      } catch (error) {
        if (error instanceof MediaRequestError) return fail(error.code, error.message);
        if (error instanceof HttpError && error.status === 503) return fail(error.code, error.message);
        // The protocol answers every request exactly once: a failure of ours too, with no detail beyond the request id.
        return fail('internal_error', 'the request failed on the server; report the request id', error);
      }
    },
    onClose(conn) {
      conn.user.unsubscribe?.();
      if (conn.user.expiry) deps.clock.clearTimeout(conn.user.expiry);
      const key = memberKey(conn.user.grant);
      if (byMember.get(key) === conn) byMember.delete(key);
      conn.user.leave();
      deps.rooms.disconnected(conn);
    },
  });
  return {
    endpoint,
    connections: () => byMember.size,
    stop: () => {
      if (sweep) deps.clock.clearTimeout(sweep);
      sweep = undefined;
    },
  };
}
