/**
 * WebSocket endpoints on uWebSockets.js. An endpoint is frozen data (`defineWebSocketEndpoint`) mounted on an app
 * (`mountWebSocketEndpoint`). The framework owns what no handler should have to get right on its own: the codec, the
 * authenticated upgrade, the limits, the heartbeats, and turning every failure into a reason the client can read.
 *
 * Handshake
 *   The client lists subprotocols in its order of preference and the first one the endpoint supports is echoed. With
 *   no `Sec-WebSocket-Protocol` header the endpoint's first codec (JSON) is used and nothing is echoed, because a
 *   browser fails a handshake that names a subprotocol it did not offer. Offering only unknown subprotocols is refused
 *   with 400 `unsupported_subprotocol` listing the supported ones: an explained refusal beats a silently dead socket.
 *   The codec is checked before `authenticate`, so no credential work is spent on a doomed request. `authenticate`
 *   throwing an HttpError refuses the upgrade with that status and a problem+json body (`code`, `requestId`); any other
 *   throw is logged and answered 500 `internal_error`. Once it has returned, either the socket opens (and `onClose`
 *   follows its close) or `onAbandoned` is told that it never will: a limit can take its place in `authenticate`, in
 *   the same step as its check, and get it back exactly once.
 *
 * Close codes (so a client learns why it was dropped without anyone reading server logs)
 *   1000  conn.close() default.
 *   1001  shutdown(): go away and reconnect, nothing was wrong with the client.
 *   1003  a text frame on a binary subprotocol or the reverse: the client runs another codec than it negotiated,
 *         so every later message would fail too.
 *   1007  bytes the codec cannot decode: likewise, the stream is not the protocol any more. A text frame that is not
 *         UTF-8 uWS cuts itself, before any codec sees it (the client sees 1006); onClose and the observer get 1007.
 *   1008  any message to an endpoint with `inbound: null` (read-only channels): a client that writes there is
 *         confused, and ignoring it would hide the bug.
 *   1009  a message over maxMessageBytes. uWS itself does not send 1009: past its maxPayloadLength it cuts the TCP
 *         connection (the client sees 1006). So uWS's limit is set to twice ours and we close with a proper 1009 in
 *         between; beyond that uWS's cut stands, and onClose and the observer are told 1009 all the same.
 *   1011  onOpen failed: the connection has no state to be served from.
 *   4008  slow consumer: a send, or the pong uWS answers a ping with, left more than maxBackpressureBytes queued for
 *         a client that does not read (behind any one message larger than that, which a reading client still gets
 *         whole). Closing is
 *         the only way to keep server memory bounded; the client must reconnect and resynchronise. (4000 + 408.)
 *         The close frame queues behind the unread data, so such a client usually sees 1006; onClose and the
 *         observer get 4008.
 *   4029  over messagesPerMinute (a token bucket: bursts of N, N per minute sustained); a `rate_limited` error message
 *         goes first. (4000 + 429.) The bucket is the connection's own unless the endpoint supplies one
 *         (`messageBudget`), such as one per person that their reconnects share.
 *   Heartbeat failures are uWS's: a peer silent for idleTimeoutSeconds is cut, reported as 1006.
 *
 * In-band error messages: `{ type: 'error', code, message, requestId, details? }` unless the endpoint renders its own;
 * `requestId` is minted for the error and logged with it (the spec: every error has a stable code and a request id)
 *   validation_failed  the decoded message failed the `inbound` schema, or holds text Postgres cannot keep (U+0000,
 *                      an unpaired surrogate: detail code `unstorable_text`), or a `__proto__` member (which the
 *                      schema would never see); `details` point into it (JSON Pointers).
 *                      The connection stays open: one bad message is a client bug to report, not a session to drop.
 *   <HttpError code>   onMessage threw an HttpError: its code and message are meant for the client.
 *   internal_error     onMessage threw or rejected with anything else: logged with its stack, no detail leaks, and
 *                      the process never goes down for it.
 *
 * Heartbeats: uWS `idleTimeout` with `sendPingsAutomatically`. uWS pings a peer silent for the timeout minus a margin
 * (4 s at 8–15 s, up to 16 s for long timeouts) and cuts it when nothing, not even a pong, came back by the end of the
 * timeout, so dead peers and their buffers go away even while we keep sending. uWS aborts the process (it does not
 * throw) for an idleTimeout other than 0 or 8–960, so the definition checks it up front, and asks for a multiple of 4,
 * uWS's timer granularity (a timer may fire up to 4 s early).
 *
 * Ordering: onMessage is called synchronously from the uWS handler in arrival order; an async onMessage is not awaited
 * before the next message is delivered. Ordering beyond that belongs to the actor mailbox the handler sends into.
 */
import type { Logger } from 'pino';
import type { us_socket_context_t } from 'uWebSockets.js';
import type * as z from 'zod';
import { LogThrottle } from '../../actors/log-throttle.js';
import { bearerChallenge } from '../http/credentials.js';
import { HttpError, pointerToken, serverDraining, unstorableTextDetail, type ErrorDetail } from '../http/errors.js';
import { framingRefusal, hasBody } from '../http/framing.js';
import { watchAbort, type AbortWatch } from '../http/reply-writer.js';
import { unstorableTextAt } from '../../storage/storable-text.js';
import { maySpellProto, protoMemberAt } from '../proto-member.js';
import { requestHeaders, uws, type HttpRequest, type HttpResponse, type TemplatedApp, type WebSocket } from '../uws.js';
import { chooseCodec, DEFAULT_CODECS, socketBearer, type WsCodec } from './codecs.js';
import { CloseCode, EndpointConnection, type SocketData, type WsConnection, type WsError } from './connection.js';
import type { MessageBudget } from './message-budgets.js';
import { captureUpgradeRequest, refuseUpgrade, routeParameterNames, type UpgradeRequest } from './upgrade.js';

export { CloseCode, type WsConnection, type WsError, type WsErrorMessage } from './connection.js';
export { jsonCodec, msgpackCodec, DEFAULT_CODECS, type WsCodec } from './codecs.js';
export { KeyedBudgets, type MessageBudget } from './message-budgets.js';
export type { UpgradeRequest } from './upgrade.js';

export interface WebSocketEndpointDefinition<TUser, TIn, TOut> {
  /** uWS route pattern, e.g. `/v1/runtime/sessions/:sessionId/socket`. */
  readonly path: string;
  /** For logs and metrics. */
  readonly name: string;
  /** Supported codecs; defaults to JSON then msgpack. The first is used when the client names no subprotocol. */
  readonly codecs?: readonly WsCodec[];
  /** Largest client message, in bytes of the frame payload. */
  readonly maxMessageBytes: number;
  /**
   * Largest server message, in bytes of the frame payload in the connection's codec, when the protocol promises one
   * (clients may set their WebSocket's maximum message size to it). A larger message is a bug of the server: it is not
   * sent but logged at error level, and `oversized` may name a message to send instead. A framework error message
   * (`validation_failed` listing many issues, say) that is over it goes without its `details`. Absent: no limit.
   */
  readonly maxOutboundMessageBytes?: number;
  /** What to send instead of `message`, which is over maxOutboundMessageBytes (an answer to the same request, say); undefined sends nothing. */
  oversized?(conn: WsConnection<TUser, TOut>, message: TOut): TOut | undefined;
  /**
   * Largest amount of outbound data queued for one client before it is closed as a slow consumer (4008); one message
   * larger than this is still sent whole, and the limit then counts what queues behind it.
   */
  readonly maxBackpressureBytes: number;
  /** Heartbeat: a multiple of 4 from 8 to 960. */
  readonly idleTimeoutSeconds: number;
  /** Rate limit on client messages, per connection unless `messageBudget` says whose; absent means none. */
  readonly messagesPerMinute?: number;
  /**
   * The budget a connection's messages are taken from, when the limit belongs to someone who may reconnect (a
   * person): return that someone's budget (`KeyedBudgets`, at `messagesPerMinute`) so a reconnect does not start
   * afresh. Called once per connection, after `authenticate`. Absent: each connection has a bucket of its own.
   */
  messageBudget?(user: TUser): MessageBudget;
  /** Schema of client messages; `null` refuses every client message (1008). */
  readonly inbound: z.ZodType<TIn> | null;
  /**
   * The upgrade is opened by a bearer (`socketBearer`: the subprotocol `registry.bearer.<token>`, or `Authorization`):
   * every 401 of `authenticate` that names no challenge of its own carries `WWW-Authenticate` as the gateway's bearer
   * operations do (`bearerChallenge`, RFC 6750 3), so no refusal path of a socket can forget it.
   */
  readonly takesBearer?: boolean;
  /**
   * Returns the connection's user, or throws an HttpError to refuse the upgrade with its status. What it takes for the
   * connection (a place under a limit, checked and taken in one step so that upgrades in flight together cannot all
   * pass) is given back by exactly one of `onClose`, once the socket opened, or `onAbandoned`, if it never does.
   */
  authenticate(upgrade: UpgradeRequest): Promise<TUser>;
  /**
   * `authenticate` returned `user`, but no socket opened for it: the client went away meanwhile, the server began
   * shutting down (503), or the upgrade failed. Not called for a socket that opened, even one closed at once.
   */
  onAbandoned?(user: TUser): void;
  /**
   * Whose connection it is, bound to every log line of it (ids such as a session's, never a credential): without it a
   * line names only the connection id minted at the upgrade, which nothing else in the logs knows.
   */
  logContext?(user: TUser): Readonly<Record<string, string>>;
  onOpen?(conn: WsConnection<TUser, TOut>): void | Promise<void>;
  onMessage?(conn: WsConnection<TUser, TOut>, message: TIn): void | Promise<void>;
  /** After the socket closed: `conn.send` is a no-op from here. */
  onClose?(conn: WsConnection<TUser, TOut>, code: number, reason: string): void | Promise<void>;
  /** Renders a framework error as this protocol's own error message; default `{ type: 'error', code, message, requestId, details? }`. */
  errorMessage?(error: WsError): TOut;
}

export type WebSocketEndpoint<TUser, TIn, TOut> = Readonly<
  WebSocketEndpointDefinition<TUser, TIn, TOut> & {
    readonly codecs: readonly WsCodec[];
    /** The subprotocol tokens offered, in the order of `codecs`. */
    readonly subprotocols: readonly string[];
  }
>;

/** Checks the limits once, at startup (some bad values make uWS abort the process later), and freezes the result. */
export function defineWebSocketEndpoint<TUser, TIn, TOut>(
  definition: WebSocketEndpointDefinition<TUser, TIn, TOut>,
): WebSocketEndpoint<TUser, TIn, TOut> {
  const codecs = Object.freeze([...(definition.codecs ?? DEFAULT_CODECS)]);
  const subprotocols = Object.freeze(codecs.map((codec) => codec.subprotocol));
  const problems: string[] = [];
  if (!definition.path.startsWith('/')) problems.push('path must start with "/"');
  if (definition.name.trim() === '') problems.push('name must not be empty');
  if (codecs.length === 0) problems.push('at least one codec is required');
  if (new Set(subprotocols).size !== subprotocols.length) problems.push('codec subprotocols must be distinct');
  if (!isPositiveInteger(definition.maxMessageBytes)) problems.push('maxMessageBytes must be a positive integer');
  if (definition.maxOutboundMessageBytes !== undefined && !isPositiveInteger(definition.maxOutboundMessageBytes)) problems.push('maxOutboundMessageBytes must be a positive integer');
  if (!isPositiveInteger(definition.maxBackpressureBytes)) {
    problems.push('maxBackpressureBytes must be a positive integer');
  }
  const idle = definition.idleTimeoutSeconds;
  if (!Number.isInteger(idle) || idle < 8 || idle > 960 || idle % 4 !== 0) {
    problems.push('idleTimeoutSeconds must be a multiple of 4 from 8 to 960 (uWS aborts the process otherwise)');
  }
  const rate = definition.messagesPerMinute;
  if (rate !== undefined && !isPositiveInteger(rate)) problems.push('messagesPerMinute must be a positive integer');
  if (definition.messageBudget && rate === undefined) {
    problems.push('messageBudget needs messagesPerMinute (the limit a refusal names)');
  }
  if (problems.length > 0) {
    throw new Error(`WebSocket endpoint ${definition.name || definition.path}: ${problems.join('; ')}`);
  }
  return Object.freeze({ ...definition, codecs, subprotocols });
}

export interface WebSocketObserver {
  /**
   * The path's HTTP answer: 101 for an upgrade, or a refusal (426 without a handshake, 405, 400, the 401 or 503 of
   * `authenticate`, 503 while draining). Not called when the client went away before any answer.
   */
  answered?(name: string, method: string, status: number, durationMs: number): void;
  opened(name: string): void;
  /** `byServer`: the server closed it (a code of its own choosing); otherwise the client or the network did. */
  closed(name: string, code: number, byServer: boolean): void;
}

export interface WebSocketDeps {
  readonly logger: Logger;
  readonly observer?: WebSocketObserver;
  newRequestId(): string;
}

export interface MountedWebSocketEndpoint {
  readonly name: string;
  /** Open connections. */
  connectionCount(): number;
  /** Refuses further upgrades (503 `server_draining`, as the HTTP drain) and closes every open connection, 1001 by default. */
  shutdown(code?: number, reason?: string): void;
}

/** uWS's own limit, past which it cuts the TCP connection without a close frame; below it we answer 1009. */
const UWS_PAYLOAD_FACTOR = 2;
/** The close reason uWS reports when it cut a connection over its maxPayloadLength. */
const UWS_TOO_BIG_REASON = 'Received too big message';
/** The close reason uWS reports when it cut a connection for a text frame that is not UTF-8. */
const UWS_INVALID_UTF8_REASON = 'Received invalid UTF-8';
const ABNORMAL_CLOSURE = 1006;

/** Registers the endpoint's route on the app; the handle returned is for metrics and shutdown. */
export function mountWebSocketEndpoint<TUser, TIn, TOut>(
  app: TemplatedApp,
  endpoint: WebSocketEndpoint<TUser, TIn, TOut>,
  deps: WebSocketDeps,
): MountedWebSocketEndpoint {
  const logger = deps.logger.child({ endpoint: endpoint.name });
  /** A dead dependency refuses every upgrade alike (clients reconnecting in a loop): a few lines, not one each. */
  const quiet = new LogThrottle(logger);
  const parameterNames = routeParameterNames(endpoint.path);
  const open = new Set<EndpointConnection<TUser, TOut>>();
  let shuttingDown = false;
  const renderError = (error: WsError): unknown =>
    endpoint.errorMessage ? endpoint.errorMessage(error) : { type: 'error', ...error };
  const answered = (method: string, status: number, started: number): void =>
    deps.observer?.answered?.(endpoint.name, method, status, performance.now() - started);
  /** Every refusal of the path goes through here, so none goes uncounted. */
  const refuse = (res: HttpResponse, watch: AbortWatch, error: HttpError, requestId: string, method: string, started: number, head = false): void => {
    refuseClosing(res, watch, error, requestId, head);
    if (watch.aborted) return;
    answered(method, error.status, started);
    // The client's doing is debug, as the gateway's HTTP refusals are; a 5xx was logged where it arose.
    if (error.status < 500) logger.debug({ requestId, method, status: error.status, code: error.code }, 'upgrade refused');
  };

  async function upgrade(
    res: HttpResponse,
    request: UpgradeRequest,
    context: us_socket_context_t,
    watch: AbortWatch,
    started: number,
  ): Promise<void> {
    const headers = request.headers;
    const choice = chooseCodec(headers['sec-websocket-protocol'] ?? '', endpoint.codecs);
    if (choice.kind === 'unsupported') {
      const supported = endpoint.subprotocols.join(', ');
      refuse(res, watch, unsupportedSubprotocol(choice.offered, supported), request.requestId, request.method, started);
      return;
    }
    let user: TUser;
    try {
      user = await endpoint.authenticate(request);
    } catch (error) {
      const requestId = request.requestId;
      let refusal: HttpError;
      if (error instanceof HttpError) {
        refusal = endpoint.takesBearer ? challenged(error, headers) : error;
        // A 4xx is the client's doing (a stranger with a bad token): one info line each let anyone fill the logs,
        // so it is debug (`refuse` logs it), as the gateway's HTTP refusals are. A 5xx (storage down) is the server's: warn.
        if (error.status >= 500) quiet.say('warn', `upgrade refused\u0000${error.code}`, { err: error, requestId, status: error.status, code: error.code }, 'upgrade refused');
      } else {
        refusal = new HttpError(500, 'internal_error', 'authentication failed');
        quiet.say('error', 'authenticate failed', { err: error, requestId }, 'authenticate failed');
      }
      refuse(res, watch, refusal, requestId, request.method, started); // nothing is written if the client is gone
      return;
    }
    // uWS copies the properties of the socket's data into its user data, so the flags live in a shared box.
    const upgrading = { now: true, opened: false };
    try {
      if (watch.aborted) {
        logger.debug({ requestId: request.requestId }, 'client went away during the upgrade');
        return;
      }
      if (shuttingDown) {
        refuse(res, watch, serverDraining(), request.requestId, request.method, started);
        return;
      }
      const connection = new EndpointConnection<TUser, TOut>({
        id: request.requestId,
        user,
        codec: choice.codec,
        logger: logger.child({ connectionId: request.requestId, ...endpoint.logContext?.(user) }),
        limits: {
          maxBackpressureBytes: endpoint.maxBackpressureBytes,
          messagesPerMinute: endpoint.messagesPerMinute,
          messageBudget: endpoint.messageBudget?.(user),
          maxOutboundBytes: endpoint.maxOutboundMessageBytes,
        },
        ...(endpoint.oversized ? { oversized: endpoint.oversized.bind(endpoint) } : {}),
        renderError,
        newRequestId: deps.newRequestId,
      });
      const data: SocketData<TUser, TOut> = { connection, codec: choice.codec, upgrading };
      res.cork(() => {
        res.upgrade(
          data,
          headers['sec-websocket-key'] ?? '',
          choice.subprotocol,
          headers['sec-websocket-extensions'] ?? '',
          context,
        );
      });
      if (upgrading.opened) answered(request.method, 101, started);
    } finally {
      upgrading.now = false;
      // uWS runs `open` from within upgrade(), so by now a socket that will ever open has.
      if (!upgrading.opened) {
        runHandler(
          () => endpoint.onAbandoned?.(user),
          (error) => logger.error({ err: error, requestId: request.requestId }, 'onAbandoned failed'),
        );
      }
    }
  }

  /**
   * Sends an in-band error under a request id of its own, logged with the same id. Log levels as the gateway's for HTTP: a message refused for the client's doing is debug (a socket may send 200 a
   * second, and an info line each let any client fill the logs); the server's own failures are warn or error.
   */
  function refuseMessage(conn: EndpointConnection<TUser, TOut>, error: Omit<WsError, 'requestId'>, log: { level: 'debug' | 'info' | 'warn' | 'error'; msg: string; err?: unknown }): void {
    const requestId = conn.newRequestId();
    conn.logger[log.level]({ requestId, code: error.code, ...(log.err === undefined ? {} : { err: log.err }) }, log.msg);
    conn.sendError({ ...error, requestId });
  }

  function handlerFailed(conn: EndpointConnection<TUser, TOut>, error: unknown): void {
    if (error instanceof HttpError) {
      const level = error.status >= 500 ? 'warn' : 'debug';
      refuseMessage(conn, { code: error.code, message: error.message, ...detailsOf(error.details) }, { level, msg: 'message handler refused the message', ...(level === 'warn' ? { err: error } : {}) });
      return;
    }
    refuseMessage(conn, { code: 'internal_error', message: 'the server failed to handle the message' }, { level: 'error', msg: 'message handler failed', err: error });
  }

  function receive(socket: SocketData<TUser, TOut>, payload: ArrayBuffer, isBinary: boolean): void {
    const { connection: conn, codec } = socket;
    if (conn.closed) return;
    if (payload.byteLength > endpoint.maxMessageBytes) {
      conn.close(CloseCode.messageTooBig, `message over ${endpoint.maxMessageBytes} bytes`);
      return;
    }
    if (endpoint.inbound === null) {
      conn.close(CloseCode.readOnly, 'this channel accepts no client messages');
      return;
    }
    if (!conn.admitMessage()) {
      refuseMessage(conn, { code: 'rate_limited', message: `more than ${endpoint.messagesPerMinute} messages per minute` }, { level: 'info', msg: 'client over its message rate' });
      conn.close(CloseCode.rateLimited, 'rate limited');
      return;
    }
    if (codec.binary !== isBinary) {
      conn.close(CloseCode.unsupportedFrame, `${codec.subprotocol} takes ${codec.binary ? 'binary' : 'text'} frames`);
      return;
    }
    let decoded: unknown;
    try {
      decoded = codec.decode(payload);
    } catch {
      conn.close(CloseCode.undecodable, `not a ${codec.subprotocol} message`);
      return;
    }
    const unstorable = unstorableTextAt(decoded);
    if (unstorable !== undefined) {
      refuseMessage(conn, { code: 'validation_failed', message: 'the message did not validate', details: [unstorableTextDetail(unstorable, 'body')] }, { level: 'debug', msg: 'message refused' });
      return;
    }
    // JSON.parse makes `__proto__` an own member that the schema never sees (msgpack's decoder refuses the key itself).
    const proto = !codec.binary && maySpellProto(Buffer.from(payload)) ? protoMemberAt(decoded) : undefined;
    if (proto !== undefined) {
      const detail = { pointer: proto, in: 'body' as const, code: 'unrecognized', message: '`__proto__` is not a member name any message takes' };
      refuseMessage(conn, { code: 'validation_failed', message: 'the message did not validate', details: [detail] }, { level: 'debug', msg: 'message refused' });
      return;
    }
    const parsed = endpoint.inbound.safeParse(decoded);
    if (!parsed.success) {
      const details = parsed.error.issues.map((issue) => issueDetail(issue));
      refuseMessage(conn, { code: 'validation_failed', message: 'the message did not validate', details }, { level: 'debug', msg: 'message refused' });
      return;
    }
    const data = parsed.data;
    runHandler(() => endpoint.onMessage?.(conn, data), (error) => handlerFailed(conn, error));
  }

  app.ws<SocketData<TUser, TOut>>(endpoint.path, {
    compression: uws.DISABLED,
    maxPayloadLength: endpoint.maxMessageBytes * UWS_PAYLOAD_FACTOR,
    // No limit of uWS's own: it would drop every frame sent while one larger than the limit drains, which the
    // connection allows (see WsConnection's flush). Every frame but uWS's pings and pongs goes through conn.send, which
    // closes a slow consumer with 4008; pings are a few bytes per idle period, and the pongs uWS answers a client's
    // pings with are counted in `ping` below (a client may send as many pings as it likes).
    maxBackpressure: 0,
    idleTimeout: endpoint.idleTimeoutSeconds,
    sendPingsAutomatically: true,
    upgrade(res: HttpResponse, req: HttpRequest, context) {
      const started = performance.now();
      const watch = watchAbort(res);
      const request = captureUpgradeRequest(res, req, parameterNames, deps.newRequestId());
      const unframed =
        framingRefusal(request.headers) ??
        (hasBody(request.headers) ? new HttpError(400, 'body_not_allowed', 'a WebSocket handshake takes no request body', { headers: { connection: 'close' } }) : undefined);
      if (unframed) {
        refuse(res, watch, unframed, request.requestId, request.method, started);
        return;
      }
      upgrade(res, request, context, watch, started).catch((error: unknown) => {
        logger.error({ err: error, requestId: request.requestId }, 'upgrade failed');
      });
    },
    open(ws: WebSocket<SocketData<TUser, TOut>>) {
      const socket = ws.getUserData();
      socket.upgrading.opened = true;
      const conn = socket.connection;
      conn.attach(ws);
      open.add(conn);
      deps.observer?.opened(endpoint.name);
      conn.logger.debug({ codec: conn.codec }, 'connection opened');
      // Said in-band first, like any refusal: the close frame alone carries neither a code nor a request id.
      const failed = (error: unknown): void => {
        if (error instanceof HttpError) {
          refuseMessage(conn, { code: error.code, message: error.message, ...detailsOf(error.details) }, { level: error.status >= 500 ? 'error' : 'info', msg: 'onOpen refused the connection', err: error });
          conn.close(error.status === 503 ? CloseCode.tryAgainLater : CloseCode.internalError, error.code);
          return;
        }
        refuseMessage(conn, { code: 'internal_error', message: 'the server failed to open the connection' }, { level: 'error', msg: 'onOpen failed', err: error });
        conn.close(CloseCode.internalError, 'internal error');
      };
      runHandler(() => endpoint.onOpen?.(conn), failed);
      conn.flush();
    },
    message(ws: WebSocket<SocketData<TUser, TOut>>, payload: ArrayBuffer, isBinary: boolean) {
      const socket = ws.getUserData();
      receive(socket, payload, isBinary);
      socket.connection.flush();
    },
    ping(ws: WebSocket<SocketData<TUser, TOut>>) {
      ws.getUserData().connection.pinged();
    },
    drain(ws: WebSocket<SocketData<TUser, TOut>>) {
      ws.getUserData().connection.logger.trace({ bufferedBytes: ws.getBufferedAmount() }, 'drained');
    },
    close(ws: WebSocket<SocketData<TUser, TOut>>, wireCode: number, message: ArrayBuffer) {
      const conn = ws.getUserData().connection;
      const byServer = conn.closed;
      conn.detach();
      open.delete(conn);
      const reason = Buffer.from(message).toString('utf8');
      const code =
        wireCode !== ABNORMAL_CLOSURE ? wireCode
        : reason === UWS_TOO_BIG_REASON ? CloseCode.messageTooBig
        : reason === UWS_INVALID_UTF8_REASON ? CloseCode.undecodable
        : wireCode;
      if (ws.getUserData().upgrading.now && code === ABNORMAL_CLOSURE) {
        // The cork() epilogue after an asynchronous upgrade can shut the new socket down (uNetworking/uWebSockets#1928,
        // fixed upstream in C++ by #1929, not in the npm build we run): the client sees 1006 and must reconnect.
        conn.logger.warn('uWS closed the socket right after its upgrade (uNetworking/uWebSockets#1928); the client must reconnect');
      }
      deps.observer?.closed(endpoint.name, code, byServer);
      conn.logger.debug({ code, reason }, 'connection closed');
      runHandler(
        () => endpoint.onClose?.(conn, code, reason),
        (error) => conn.logger.error({ err: error }, 'onClose failed'),
      );
    },
  });

  // uWS passes a GET without the WebSocket handshake on to the next route, where the path would look unknown (404).
  const upgradeRequired = (head: boolean) => (res: HttpResponse, req: HttpRequest): void => {
    const started = performance.now();
    const watch = watchAbort(res);
    const framing = requestHeaders(req);
    const refusal =
      framingRefusal(framing) ??
      new HttpError(426, 'websocket_upgrade_required', `${endpoint.path} is a WebSocket endpoint: open it with a WebSocket handshake`, {
        headers: { upgrade: 'websocket', ...(hasBody(framing) ? { connection: 'close' } : {}) },
      });
    refuse(res, watch, refusal, deps.newRequestId(), head ? 'HEAD' : 'GET', started, head);
  };
  app.get(endpoint.path, upgradeRequired(false));
  app.head(endpoint.path, upgradeRequired(true));
  // The path exists, for GET only: any other method is 405, not the 404 of an unknown path.
  app.any(endpoint.path, (res, req) => {
    const started = performance.now();
    const watch = watchAbort(res);
    const method = req.getMethod().toUpperCase();
    const framing = requestHeaders(req);
    const refusal =
      framingRefusal(framing) ??
      new HttpError(405, 'method_not_allowed', `${method} is not allowed on ${endpoint.path}, a WebSocket endpoint`, {
        headers: { allow: 'GET, HEAD', ...(hasBody(framing) ? { connection: 'close' } : {}) },
      });
    refuse(res, watch, refusal, deps.newRequestId(), method, started);
  });

  return Object.freeze({
    name: endpoint.name,
    connectionCount: () => open.size,
    shutdown(code: number = CloseCode.goingAway, reason = 'server shutting down') {
      shuttingDown = true;
      for (const conn of [...open]) conn.close(code, reason);
    },
  });
}

/** Handlers may be sync or async; either way a failure reaches `onError`, never the process. */
function runHandler(call: () => void | Promise<void> | undefined, onError: (error: unknown) => void): void {
  try {
    const pending = call();
    if (pending instanceof Promise) pending.catch(onError);
  } catch (error) {
    onError(error);
  }
}

function unsupportedSubprotocol(offered: readonly string[], supported: string): HttpError {
  const message = `none of the offered subprotocols is supported; use one of: ${supported}`;
  return new HttpError(400, 'unsupported_subprotocol', message, {
    details: [
      {
        pointer: '/sec-websocket-protocol',
        in: 'header',
        code: 'unsupported',
        message: `offered ${offered.join(', ')}; supported ${supported}`,
      },
    ],
  });
}

/** A 401 of an upgrade a bearer opens, with the Bearer challenge unless it names one (see `takesBearer`). */
function challenged(refusal: HttpError, headers: Readonly<Record<string, string>>): HttpError {
  if (refusal.status !== 401 || refusal.headers['www-authenticate'] !== undefined) return refusal;
  return new HttpError(refusal.status, refusal.code, refusal.message, {
    family: refusal.family,
    details: refusal.details,
    headers: { ...refusal.headers, 'www-authenticate': bearerChallenge(headers, socketBearer(headers)) },
    ...(refusal.oauthError === undefined ? {} : { oauthError: refusal.oauthError }),
    ...(refusal.cause === undefined ? {} : { cause: refusal.cause }),
  });
}

/**
 * `refuseUpgrade`, except that an answer closing its connection (a framing refusal, a body no WebSocket request takes)
 * is written once uWS has parsed what came with the request, as the gateway's are: written while uWS parses, the
 * connection stays open and uWS serves the bytes behind it as the next request.
 */
function refuseClosing(res: HttpResponse, watch: AbortWatch, refusal: HttpError, requestId: string, head = false): void {
  if (refusal.headers.connection === 'close') setImmediate(() => refuseUpgrade(res, watch, refusal, requestId, head));
  else refuseUpgrade(res, watch, refusal, requestId, head);
}

function issueDetail(issue: z.core.$ZodIssue): ErrorDetail {
  const pointer = issue.path.map((p) => `/${pointerToken(String(p))}`).join('');
  return { pointer, in: 'body', code: issue.code, message: issue.message };
}

function detailsOf(details: readonly ErrorDetail[]): { details?: readonly ErrorDetail[] } {
  return details.length > 0 ? { details } : {};
}

function isPositiveInteger(value: number): boolean {
  return Number.isInteger(value) && value > 0;
}
