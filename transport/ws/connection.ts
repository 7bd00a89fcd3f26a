import type { Logger } from 'pino';
import type { ErrorDetail } from '../http/errors.js';
import type { WebSocket } from '../uws.js';
import type { WsCodec } from './codecs.js';
import { TokenBucket, type MessageBudget } from './message-budgets.js';

/** Close codes this framework sends or reports; see the comment at the top of endpoint.ts for why each exists. */
export const CloseCode = Object.freeze({
  normal: 1000,
  goingAway: 1001,
  unsupportedFrame: 1003,
  undecodable: 1007,
  readOnly: 1008,
  messageTooBig: 1009,
  internalError: 1011,
  /** The server could not admit the connection right now (its stores did not answer): reconnect later. */
  tryAgainLater: 1013,
  slowConsumer: 4008,
  rateLimited: 4029,
} as const);

/** A protocol-level error the framework (or a handler throwing an HttpError) reports to the client in-band. */
export interface WsError {
  readonly code: string;
  readonly message: string;
  /** Minted for this error and logged with it, so a client's report leads an operator to the server's log line. */
  readonly requestId: string;
  readonly details?: readonly ErrorDetail[];
}

/** What a client receives for a WsError unless the endpoint renders its own (`errorMessage`). */
export interface WsErrorMessage extends WsError {
  readonly type: 'error';
}

/** One open WebSocket as endpoint handlers see it. */
export interface WsConnection<TUser, TOut> {
  /** The request id of the upgrade, so the upgrade's log lines and the connection's correlate. */
  readonly id: string;
  readonly user: TUser;
  /** The subprotocol token of the codec in use. */
  readonly codec: string;
  /** Bound to the endpoint name and connection id. */
  readonly logger: Logger;
  readonly closed: boolean;
  /**
   * Mints a request id (the endpoint's generator) for a refusal the handler answers in its own protocol, so it carries
   * one like the framework's `error` messages do; log it with the refusal.
   */
  newRequestId(): string;
  /**
   * Encodes and sends. False when the connection is closed, when this send pushed it past its backpressure limit, in
   * which case it has just been closed with 4008, or when the message was over the endpoint's maxOutboundMessageBytes
   * and nothing was sent instead (logged at error level). Throws only if the message cannot be encoded. Messages sent in
   * one tick leave together, in order, at its end (or sooner, before a close or near the limit).
   */
  send(message: TOut): boolean;
  /** Closes with a close frame; idempotent, and a no-op once the socket has closed. */
  close(code?: number, reason?: string): void;
  /** Bytes queued in user space waiting for the client to read; 0 once closed. */
  bufferedBytes(): number;
}

/** What uWS keeps for us on each socket (it copies the object's properties, so we store one reference). */
export interface SocketData<TUser, TOut> {
  readonly connection: EndpointConnection<TUser, TOut>;
  readonly codec: WsCodec;
  /**
   * `now` is true while `res.upgrade()` and the cork around it run: a close then is uWS's, not the client's. `opened`:
   * the `open` handler ran, so `onClose`, not `onAbandoned`, gives back what `authenticate` took. A box, because uWS
   * copies the user data's properties: plain booleans would be two copies, the upgrade's and the socket's.
   */
  readonly upgrading: { now: boolean; opened: boolean };
}

export interface ConnectionLimits {
  readonly maxBackpressureBytes: number;
  readonly messagesPerMinute: number | undefined;
  /** Where the connection's messages are counted when the endpoint keeps the budget (per person, say); else its own. */
  readonly messageBudget?: MessageBudget | undefined;
  /** Largest frame payload sent (the endpoint's maxOutboundMessageBytes); undefined: no limit. */
  readonly maxOutboundBytes?: number | undefined;
}

/** uWS `send` result meaning the message was not queued because the socket was over `maxBackpressure`. */
const SEND_DROPPED = 2;
/** A close frame carries at most 125 bytes: two for the code, the rest for the reason. */
const MAX_REASON_BYTES = 123;

/**
 * The uWS socket is only valid from `open` until its `close` event; after that any call on it throws. So the
 * connection holds the socket only while it is open and forgets it on close, and every method checks that first.
 */
export class EndpointConnection<TUser, TOut> implements WsConnection<TUser, TOut> {
  readonly id: string;
  readonly user: TUser;
  readonly codec: string;
  readonly logger: Logger;
  readonly #encoder: WsCodec;
  readonly #limits: ConnectionLimits;
  readonly #renderError: (error: WsError) => unknown;
  readonly #newRequestId: () => string;
  readonly #oversized: ((conn: WsConnection<TUser, TOut>, message: TOut) => TOut | undefined) | undefined;
  readonly #budget: MessageBudget | undefined;
  #socket: WebSocket<SocketData<TUser, TOut>> | undefined;
  #closed = false;
  /** Frames encoded this tick and not yet handed to uWS; see #write. */
  #outbox: Array<string | Uint8Array> = [];
  #outboxBytes = 0;
  /** uWS's buffered amount after the last flush: it only shrinks until the next one, so it bounds it from above. */
  #bufferedAtFlush = 0;
  /** A frame larger than the limit that may still be in uWS's buffer: the backlog behind it is what counts. */
  #oversize = 0;
  #flushScheduled = false;
  readonly #flushQueued = (): void => {
    this.#flushScheduled = false;
    this.#flush();
  };

  constructor(options: {
    id: string;
    user: TUser;
    codec: WsCodec;
    logger: Logger;
    limits: ConnectionLimits;
    renderError: (error: WsError) => unknown;
    newRequestId: () => string;
    oversized?: (conn: WsConnection<TUser, TOut>, message: TOut) => TOut | undefined;
  }) {
    this.id = options.id;
    this.user = options.user;
    this.codec = options.codec.subprotocol;
    this.logger = options.logger;
    this.#encoder = options.codec;
    this.#limits = options.limits;
    this.#renderError = options.renderError;
    this.#newRequestId = options.newRequestId;
    this.#oversized = options.oversized;
    const perMinute = options.limits.messagesPerMinute;
    this.#budget = options.limits.messageBudget ?? (perMinute === undefined ? undefined : new TokenBucket(perMinute));
  }

  get closed(): boolean {
    return this.#closed;
  }

  newRequestId(): string {
    return this.#newRequestId();
  }

  /** Called from the uWS `open` handler. */
  attach(socket: WebSocket<SocketData<TUser, TOut>>): void {
    this.#socket = socket;
  }

  /** Called from the uWS `close` handler: from here on the socket must not be touched. */
  detach(): void {
    this.#closed = true;
    this.#socket = undefined;
    this.#outbox = [];
    this.#outboxBytes = 0;
  }

  send(message: TOut): boolean {
    return this.#write(message, message, undefined);
  }

  /** An error the framework reports; over the outbound limit, it goes without its details. */
  sendError(error: WsError): boolean {
    return this.#write(this.#renderError(error), undefined, error);
  }

  close(code: number = CloseCode.normal, reason = ''): void {
    if (!isSendableCloseCode(code)) throw new RangeError(`${code} is not a close code an endpoint may send`);
    // What was sent before the close goes out before it (a `lease.ended` before its close code, say).
    if (this.#outbox.length > 0 && !this.#flush()) return;
    const socket = this.#socket;
    this.#closed = true;
    if (!socket) return;
    this.#socket = undefined;
    // uWS calls our close handler synchronously from end(), which detaches again; that is harmless.
    socket.end(code, truncateUtf8(reason, MAX_REASON_BYTES));
  }

  bufferedBytes(): number {
    const socket = this.#socket;
    return socket ? socket.getBufferedAmount() + this.#outboxBytes : 0;
  }

  /** Takes one inbound message from the rate budget; false when the client is over `messagesPerMinute`. */
  admitMessage(now = performance.now()): boolean {
    return this.#budget?.take(now) ?? true;
  }

  /**
   * What goes instead of a message over the outbound limit: the endpoint's stand-in for a message `send` was given,
   * or a framework error without its details.
   */
  #substitute(message: TOut | undefined, error: WsError | undefined): unknown {
    if (error === undefined) return message === undefined ? undefined : this.#oversized?.(this, message);
    const { details, ...bare } = error;
    return details ? this.#renderError(bare) : undefined;
  }

  /**
   * Replies often leave outside uWS's handlers (from commit callbacks, timers), where uWS does not cork, so each send
   * would be a syscall of its own. Frames sent in one tick are therefore queued and handed to uWS together, corked,
   * from a microtask: the replies a group commit releases to one socket leave in one write. The backpressure check is
   * kept exact: whenever what uWS may hold plus what is queued would pass the limit, the queue is flushed at once and
   * uWS's buffer checked, so `send` returns false (and the connection is closed with 4008) on the very send that
   * pushed it past, as when every frame went straight to uWS, and a flush from the microtask never finds it past.
   */
  #write(message: unknown, sent: TOut | undefined, error: WsError | undefined): boolean {
    if (this.#closed || !this.#socket) return false;
    let payload = this.#encoder.encode(message);
    let bytes = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength;
    const limit = this.#limits.maxOutboundBytes;
    if (limit !== undefined && bytes > limit) {
      // A promise to the client broken by the server's own code: never sent, so a client holding to the limit is not
      // cut off, and said loudly, so a test or an operator finds the message that grew.
      const substitute = this.#substitute(sent, error);
      const substituteBytes = substitute === undefined ? undefined : (payload = this.#encoder.encode(substitute), typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength);
      this.logger.error({ type: typeOf(message), bytes, limit, substitute: typeOf(substitute), substituteBytes }, 'outbound message over maxOutboundMessageBytes not sent');
      if (substituteBytes === undefined || substituteBytes > limit) return false;
      bytes = substituteBytes;
    }
    this.#outbox.push(payload);
    this.#outboxBytes += bytes;
    if (this.#bufferedAtFlush - this.#oversize + this.#outboxBytes > this.#limits.maxBackpressureBytes) return this.#flush();
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      queueMicrotask(this.#flushQueued);
    }
    return true;
  }

  /**
   * Called at the end of the uWS handlers (open, message), which uWS corks itself: what the handler sent synchronously
   * leaves inside that cork, as it would have without the queue. (So what `onOpen` sends also still leaves ahead of the
   * spurious 1006 close uWS sometimes gives a socket right after an asynchronous upgrade, uNetworking/uWebSockets#1928.)
   */
  flush(): void {
    if (this.#outbox.length > 0) this.#flush();
  }

  /**
   * Called when uWS has answered a client's ping: the pong queues like any frame, behind whatever the client has not
   * read, but goes around `send`. A client that pings and never reads would otherwise grow that queue without bound
   * (uWS's own limit is off, see the endpoint), so the backlog is checked here as after a flush; false when closed.
   */
  pinged(): boolean {
    const socket = this.#socket;
    if (!socket) return false;
    const buffered = socket.getBufferedAmount();
    if (buffered - this.#oversize <= this.#limits.maxBackpressureBytes) return true;
    this.logger.warn({ bufferedBytes: buffered }, 'closing slow consumer (unread pongs)');
    this.close(CloseCode.slowConsumer, 'slow consumer');
    return false;
  }

  /** Hands the queued frames to uWS in one corked write; false when that left the client over the limit (closed). */
  #flush(): boolean {
    const socket = this.#socket;
    const frames = this.#outbox;
    if (!socket || frames.length === 0) return socket !== undefined;
    this.#outbox = [];
    this.#outboxBytes = 0;
    const binary = this.#encoder.binary;
    let largest = 0;
    for (const frame of frames) largest = Math.max(largest, typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength);
    let dropped = false;
    socket.cork(() => {
      for (const frame of frames) {
        if (socket.send(frame, binary) === SEND_DROPPED) {
          dropped = true;
          return;
        }
      }
    });
    if (!this.#socket) return false;
    const buffered = socket.getBufferedAmount();
    this.#bufferedAtFlush = buffered;
    const limit = this.#limits.maxBackpressureBytes;
    // Checked after every flush, so the buffer never holds more than the limit plus one message. The limit bounds a
    // backlog, not a message: one frame larger than it (the presence list of a big Environment) still goes to a
    // client that keeps reading, and until the buffer is back under the limit only what queues up behind it counts.
    this.#oversize = buffered > limit ? Math.max(this.#oversize, largest) : 0;
    if (dropped || buffered - this.#oversize > limit) {
      this.logger.warn({ bufferedBytes: buffered }, 'closing slow consumer');
      this.close(CloseCode.slowConsumer, 'slow consumer');
      return false;
    }
    return true;
  }
}

function typeOf(message: unknown): unknown {
  return typeof message === 'object' && message !== null ? (message as { type?: unknown }).type : undefined;
}

/** RFC 6455 §7.4: 1004–1006 and 1015 are reserved for reporting and must never appear in a close frame. */
function isSendableCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  // Drop a trailing partial character rather than send invalid UTF-8, which the client would treat as a protocol error.
  return new TextDecoder().decode(bytes.subarray(0, maxBytes)).replace(/\uFFFD$/, '');
}
