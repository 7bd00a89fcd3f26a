import * as z from 'zod';
import {
  type MediaV2ServerMessage,
  MediaV2ServerMessageSchema,
  RoomViewAssembler,
  type RoomView,
} from '../../../media/control/media-control.messages.js';
import type { ControlCloseRecord, ControlResponseRecord, HelloMessage, ServerPush } from './page-api.js';

/** What the page accepts from the server: the protocol's own schema, as the server validates against. */
const ServerMessageSchema: z.ZodType<MediaV2ServerMessage> = MediaV2ServerMessageSchema;

const REQUEST_TIMEOUT_MS = 10_000;
const HELLO_TIMEOUT_MS = 10_000;
/** The grant travels as a WebSocket subprotocol, the only header a browser lets a page set on a socket. */
const BEARER_SUBPROTOCOL_PREFIX = 'registry.bearer.';

interface Pending {
  readonly type: string;
  readonly resolve: (record: ControlResponseRecord) => void;
  readonly reject: (error: Error) => void;
  readonly timer: ReturnType<typeof setTimeout>;
}

interface PushWaiter {
  readonly type: ServerPush['type'];
  readonly resolve: (push: ServerPush) => void;
}

/** Thrown for a request the server answered `ok: false`; the message starts `refused <type> <code>:`. */
export class RefusedError extends Error {
  constructor(
    readonly type: string,
    readonly code: string,
    message: string,
  ) {
    super(`refused ${type} ${code}: ${message}`);
  }
}

/**
 * The control-plane socket of one participant, as a test sees it: requests matched to their one response by id, every
 * response and push kept in arrival order, the latest room view (put together from `room.state` and its pages), and
 * how the socket closed. Every frame is checked
 * against `MediaV2ServerMessageSchema`; one that does not parse is kept as a protocol violation, not thrown.
 * Survives reconnects: the histories continue across sockets.
 */
export class ControlClient {
  #socket: WebSocket | undefined;
  #url = '';
  #nextId = 1;
  readonly #pending = new Map<string, Pending>();
  readonly #responses: ControlResponseRecord[] = [];
  readonly #pushes: ServerPush[] = [];
  readonly #untaken: ServerPush[] = [];
  readonly #waiters: PushWaiter[] = [];
  readonly #violations: string[] = [];
  readonly #onPush: (push: ServerPush) => void;
  #hello: HelloMessage | null = null;
  #room: RoomView | null = null;
  /** Per socket: a new connection's revisions are its own (a retired room starts again at 0). */
  #assembler = new RoomViewAssembler();
  #closed: ControlCloseRecord | null = null;

  constructor(onPush: (push: ServerPush) => void) {
    this.#onPush = onPush;
  }

  /** Opens a socket (closing any previous one) and resolves with its `hello`. */
  connect(url: string, grant: string): Promise<HelloMessage> {
    this.#failPending('the control socket was replaced');
    this.#socket?.close();
    this.#url = url;
    this.#closed = null;
    this.#assembler = new RoomViewAssembler();
    // The codec first (the one the server echoes), then the bearer: a browser cannot set headers on a WebSocket.
    const socket = new WebSocket(url, ['registry.v1.json', BEARER_SUBPROTOCOL_PREFIX + grant]);
    this.#socket = socket;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no valid hello within ${HELLO_TIMEOUT_MS} ms: ${this.#violations.at(-1) ?? 'nothing received'}`)), HELLO_TIMEOUT_MS);
      socket.addEventListener('message', (event) => {
        const message = this.#receive(event.data);
        if (message?.type !== 'hello') return;
        clearTimeout(timer);
        resolve(message);
      });
      socket.addEventListener('close', (event) => {
        if (socket !== this.#socket) return;
        this.#closed = { code: event.code, reason: event.reason, wasClean: event.wasClean };
        this.#failPending(`control socket closed (${event.code} ${event.reason})`);
        clearTimeout(timer);
        reject(new Error(`control socket closed (${event.code} ${event.reason}) before hello`));
      });
    });
  }

  reconnect(grant: string): Promise<HelloMessage> {
    if (!this.#url) throw new Error('reconnect before connectControl');
    return this.connect(this.#url, grant);
  }

  /** Sends a request and resolves with its response record, refusals included. */
  request(type: string, fields: Readonly<Record<string, unknown>> = {}): Promise<ControlResponseRecord> {
    const socket = this.#openSocket();
    const id = `r${this.#nextId++}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`no answer to ${type} (${id}) within ${REQUEST_TIMEOUT_MS} ms`));
      }, REQUEST_TIMEOUT_MS);
      this.#pending.set(id, { type, resolve, reject, timer });
      socket.send(JSON.stringify({ ...fields, type, id }));
    });
  }

  /** Sends a request and resolves with its `result`; a refusal rejects with a RefusedError. */
  async call(type: string, fields: Readonly<Record<string, unknown>> = {}): Promise<Readonly<Record<string, unknown>>> {
    const record = await this.request(type, fields);
    if (!record.ok) throw new RefusedError(type, record.error.code, record.error.message);
    return record.result;
  }

  sendRaw(text: string): void {
    this.#openSocket().send(text);
  }

  /** Closes the socket without `room.leave`: the server sees the member drop. */
  disconnect(): void {
    this.#socket?.close();
  }

  nextPush(type: ServerPush['type'], timeoutMs: number): Promise<ServerPush> {
    const index = this.#untaken.findIndex((push) => push.type === type);
    if (index >= 0) return Promise.resolve(this.#untaken.splice(index, 1)[0] as ServerPush);
    return new Promise((resolve, reject) => {
      const waiter: PushWaiter = {
        type,
        resolve: (push) => {
          clearTimeout(timer);
          resolve(push);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new Error(`no ${type} push within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  hello(): HelloMessage | null {
    return this.#hello;
  }
  /** The newest whole room view: the last one completed on the current socket, or on an earlier one until then. */
  roomState(): RoomView | null {
    return this.#room;
  }
  pushes(): readonly ServerPush[] {
    return this.#pushes;
  }
  responses(): readonly ControlResponseRecord[] {
    return this.#responses;
  }
  protocolViolations(): readonly string[] {
    return this.#violations;
  }
  closed(): ControlCloseRecord | null {
    return this.#closed;
  }

  #failPending(why: string): void {
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error(`${why} before ${pending.type} was answered`));
    }
    this.#pending.clear();
  }

  #openSocket(): WebSocket {
    if (!this.#socket || this.#socket.readyState !== WebSocket.OPEN) throw new Error('the control socket is not open');
    return this.#socket;
  }

  #receive(data: unknown): MediaV2ServerMessage | undefined {
    const text = typeof data === 'string' ? data : '';
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      this.#violations.push(`not JSON text: ${text.slice(0, 200)}`);
      return undefined;
    }
    const parsed = ServerMessageSchema.safeParse(json);
    if (!parsed.success) {
      this.#violations.push(`${parsed.error.message} in ${text.slice(0, 500)}`);
      return undefined;
    }
    const message = parsed.data;
    if (message.type === 'response') this.#answer(message);
    else this.#push(message);
    return message;
  }

  #answer(response: Extract<MediaV2ServerMessage, { type: 'response' }>): void {
    const pending = this.#pending.get(response.id);
    if (!pending) {
      this.#violations.push(`response to unknown request ${response.id}`);
      return;
    }
    this.#pending.delete(response.id);
    clearTimeout(pending.timer);
    const record: ControlResponseRecord = response.ok
      ? { id: response.id, type: pending.type, ok: true, result: response.result ?? {} }
      : { id: response.id, type: pending.type, ok: false, error: response.error ?? { code: 'unknown', message: 'refused without an error body', requestId: '' } };
    this.#responses.push(record);
    pending.resolve(record);
  }

  #push(push: ServerPush): void {
    if (push.type === 'hello') this.#hello = push;
    const view = this.#assembler.accept(push);
    if (view) this.#room = view;
    this.#pushes.push(push);
    const waiter = this.#waiters.findIndex((w) => w.type === push.type);
    if (waiter >= 0) this.#waiters.splice(waiter, 1)[0]?.resolve(push);
    else this.#untaken.push(push);
    this.#onPush(push);
  }
}
