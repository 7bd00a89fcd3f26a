import { bearerToken } from '../http/credentials.js';
import { Decoder, Encoder } from '@msgpack/msgpack';
import { assertOneMsgpackValue } from './msgpack-scan.js';

/**
 * A codec is a WebSocket subprotocol: the token the client offers in `Sec-WebSocket-Protocol` fixes the frame type and
 * the encoding for the life of the connection, so no message has to say how it is to be read.
 */
export interface WsCodec {
  /** The `Sec-WebSocket-Protocol` token. */
  readonly subprotocol: string;
  /** Binary frames (true) or text frames (false); a frame of the other type is a protocol error. */
  readonly binary: boolean;
  encode(message: unknown): string | Uint8Array;
  /** Returns one whole message; throws on bytes that are not exactly one message in this encoding. */
  decode(payload: ArrayBuffer): unknown;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** JSON has no integer type wide enough for int64, so an outbound bigint becomes its decimal string. */
function bigintAsString(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

export const jsonCodec: WsCodec = Object.freeze({
  subprotocol: 'registry.v1.json',
  binary: false,
  encode(message: unknown): string {
    let text: string | undefined;
    try {
      // A replacer takes JSON.stringify off V8's fast path, and bigints are rare: they make the plain call throw.
      text = JSON.stringify(message) as string | undefined;
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
      text = JSON.stringify(message, bigintAsString) as string | undefined;
    }
    if (text === undefined) throw new TypeError('a WebSocket message must be a JSON value');
    return text;
  },
  decode(payload: ArrayBuffer): unknown {
    return JSON.parse(utf8.decode(payload)) as unknown;
  },
});

/**
 * Outbound bigint is written as msgpack int64 (`useBigInt64`); inbound int64 is read as a number, as JSON would read
 * it, so one zod schema validates messages of either codec. An `undefined` member is left out (`ignoreUndefined`), as
 * JSON leaves it out: otherwise a msgpack client would get `null` where a JSON client gets nothing (mediasoup's
 * optional parameters are often `undefined`), and the same message would differ by codec. Inbound bytes are copied before decoding because uWS
 * detaches its ArrayBuffer when the handler returns, and decoded `bin` fields would otherwise be views into it.
 */
const msgpackEncoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });
const msgpackDecoder = new Decoder();

export const msgpackCodec: WsCodec = Object.freeze({
  subprotocol: 'registry.v1.msgpack',
  binary: true,
  encode(message: unknown): Uint8Array {
    return msgpackEncoder.encode(message);
  },
  decode(payload: ArrayBuffer): unknown {
    const bytes = new Uint8Array(payload.slice(0));
    assertOneMsgpackValue(bytes);
    return msgpackDecoder.decode(bytes);
  },
});

/** JSON first: it is what a client gets when it names no subprotocol. */
export const DEFAULT_CODECS: readonly WsCodec[] = Object.freeze([jsonCodec, msgpackCodec]);

export type CodecChoice =
  /** `subprotocol` is echoed in the handshake; empty when the client offered none (nothing may be echoed then). */
  | { readonly kind: 'chosen'; readonly codec: WsCodec; readonly subprotocol: string }
  | { readonly kind: 'unsupported'; readonly offered: readonly string[] };

/**
 * The client lists subprotocols in its order of preference; the first one the endpoint supports wins. No header at all
 * means the endpoint's first codec (JSON by default), so plain tools can connect. Offering only unknown ones is
 * refused, because echoing nothing would make a browser fail the connection with no explanation.
 */
export function chooseCodec(header: string, codecs: readonly WsCodec[]): CodecChoice {
  const offered = header
    .split(',')
    .map((token) => token.trim())
    .filter((token) => token.length > 0);
  const fallback = codecs[0];
  if (offered.length === 0 && fallback) return { kind: 'chosen', codec: fallback, subprotocol: '' };
  for (const token of offered) {
    const codec = codecs.find((c) => c.subprotocol === token);
    if (codec) return { kind: 'chosen', codec, subprotocol: token };
  }
  // A bearer offered as a subprotocol (browsers cannot set headers on a WebSocket) is never echoed back in an error.
  return { kind: 'unsupported', offered: offered.map((token) => (token.startsWith(BEARER_SUBPROTOCOL) ? `${BEARER_SUBPROTOCOL}…` : token)) };
}

/**
 * Browsers cannot send `Authorization` on a WebSocket, so a bearer travels as one more offered subprotocol,
 * `registry.bearer.<token>`, beside the codec the client wants (which is the one echoed).
 */
export const BEARER_SUBPROTOCOL = 'registry.bearer.';

/** The bearer of a WebSocket upgrade: offered as a subprotocol (browsers), else an `Authorization` header (tools). */
export function socketBearer(headers: Readonly<Record<string, string>>): string | undefined {
  return bearerFromSubprotocols(headers['sec-websocket-protocol'] ?? '') ?? bearerToken(headers);
}

export function bearerFromSubprotocols(header: string): string | undefined {
  for (const token of header.split(',')) {
    const trimmed = token.trim();
    if (trimmed.startsWith(BEARER_SUBPROTOCOL) && trimmed.length > BEARER_SUBPROTOCOL.length) return trimmed.slice(BEARER_SUBPROTOCOL.length);
  }
  return undefined;
}
