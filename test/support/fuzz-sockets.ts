import WebSocket from 'ws';
import { openUncut } from './uws-upgrade-cut.js';
import { exampleOf, jsonBodyCases, Rng, type ExampleMode, type JsonSchema } from './fuzz.js';

/**
 * First messages for the WebSocket endpoints, from their served AsyncAPI documents: every message a client may send
 * (the `receive` operations), at its schema's bounds and at random, and each broken as request bodies are.
 */
export async function clientMessages(documentUrl: string, rng: Rng, perMessage: number, maxBytes: number): Promise<Array<{ name: string; frame: string | Buffer }>> {
  const doc = (await (await fetch(documentUrl)).json()) as Record<string, unknown>;
  const at = (pointer: string): JsonSchema =>
    pointer
      .slice(2)
      .split('/')
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<unknown>((node, token) => (node as Record<string, unknown>)[token], doc) as JsonSchema;
  const resolve = (schema: JsonSchema): JsonSchema => (typeof schema.$ref === 'string' ? resolve(at(schema.$ref)) : schema);
  const frames: Array<{ name: string; frame: string | Buffer }> = [];
  for (const operation of Object.values(doc.operations as Record<string, { action: string; messages: JsonSchema[] }>)) {
    if (operation.action !== 'receive') continue;
    for (const reference of operation.messages) {
      const message = resolve(reference) as { name?: string; payload: JsonSchema };
      for (const mode of ['min', 'max', 'random'] as ExampleMode[]) {
        const base = exampleOf(message.payload, resolve, mode, rng);
        frames.push({ name: `${message.name} ${mode} valid`, frame: JSON.stringify(base) });
        for (const c of jsonBodyCases(base, rng, perMessage, maxBytes).slice(-perMessage)) frames.push({ name: `${message.name} ${c.name}`, frame: c.body });
      }
    }
  }
  return frames;
}

/** Frames that are no message of either codec, or of the other one. */
export const ODD_FRAMES: ReadonlyArray<{ name: string; frame: string | Buffer }> = [
  { name: 'empty text', frame: '' },
  { name: 'not JSON', frame: 'hello' },
  { name: 'lone surrogate escape', frame: '{"type":"\\ud800"}' },
  { name: 'NUL escape', frame: '{"type":"ping\\u0000"}' },
  { name: 'binary frame', frame: Buffer.from([0x80, 0xc1, 0xff]) },
  { name: 'JSON in a binary frame', frame: Buffer.from('{"type":"ping"}') },
  { name: 'deep nesting', frame: `${'['.repeat(8000)}${']'.repeat(8000)}` },
  { name: '1e309 type', frame: '{"type":1e309}' },
  { name: 'duplicate type', frame: '{"type":"ping","type":"presence.list"}' },
  { name: '__proto__', frame: '{"__proto__":{"type":"ping"},"type":"x"}' },
];

export interface SocketOutcome {
  readonly answered: number;
  readonly silent: number;
  readonly closes: Record<number, number>;
  /** Error codes the answers carried, counted. */
  readonly codes: Record<string, number>;
  /** What broke the rules: a close with 1011 (server error) or 1006 (no close frame: a crash or a cut). */
  readonly failures: string[];
}

/**
 * Sends each frame as the first message of a fresh socket from `open` (or on the open one, after an answer), waiting
 * at most `waitMs` for an answer or a close. `cutAboveBytes`: past twice an endpoint's message limit uWS cuts the
 * connection without a close frame (transport/ws/endpoint.ts), so a 1006 for a frame larger than that is the
 * documented answer.
 */
export async function sendFrames(
  open: () => Promise<WebSocket>,
  frames: ReadonlyArray<{ name: string; frame: string | Buffer }>,
  cutAboveBytes: number,
  waitMs = 1_000,
): Promise<SocketOutcome> {
  const outcome = { answered: 0, silent: 0, closes: {} as Record<number, number>, codes: {} as Record<string, number>, failures: [] as string[] };
  let socket: { ws: WebSocket; heard: number; closed?: number } | undefined;
  let sending = '';
  for (const { name, frame } of frames) {
    sending = name;
    if (!socket || socket.closed !== undefined) {
      const ws = await open();
      const current: { ws: WebSocket; heard: number; closed?: number } = { ws, heard: 0 };
      ws.on('message', (data) => {
        current.heard += 1;
        const code = errorCodeOf(data as Buffer);
        if (code !== undefined) outcome.codes[code] = (outcome.codes[code] ?? 0) + 1;
        if (code !== undefined && /internal|server_error|unavailable/.test(code)) outcome.failures.push(`answered ${code} (after ${sending})`);
      });
      ws.on('close', (code) => (current.closed = code));
      // The greeting (ready, hello), if the endpoint sends one, is not an answer.
      await new Promise((r) => setTimeout(r, 50));
      socket = current;
    }
    const s = socket;
    const before = s.heard;
    s.ws.send(frame);
    const deadline = Date.now() + waitMs;
    while (s.heard === before && s.closed === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    if (s.closed === undefined && s.heard === before) {
      // An answer may still be on its way: a socket the next frame does not share keeps outcomes apart.
      outcome.silent += 1;
      s.ws.close();
      socket = undefined;
      continue;
    }
    if (s.closed !== undefined) {
      outcome.closes[s.closed] = (outcome.closes[s.closed] ?? 0) + 1;
      const cut = s.closed === 1006 && Buffer.byteLength(frame) > cutAboveBytes;
      if (s.closed === 1011 || (s.closed === 1006 && !cut)) outcome.failures.push(`${name}: closed ${s.closed} (${String(frame).slice(0, 120)})`);
    } else outcome.answered += 1;
  }
  socket?.ws.close();
  return outcome;
}

/** The error code of an answer (runtime `error`, media `response` with `error`), if it is one. */
function errorCodeOf(data: Buffer): string | undefined {
  try {
    const message = JSON.parse(data.toString()) as { type?: unknown; code?: unknown; error?: { code?: unknown } };
    if (message.type === 'error' && typeof message.code === 'string') return message.code;
    if (message.error && typeof message.error.code === 'string') return message.error.code;
  } catch {
    // Not JSON: the codec check of the endpoint's own tests covers that.
  }
  return undefined;
}

/** Opens a WebSocket (again, when uWS cut it right after its upgrade: see openUncut), resolving once open. */
export async function openSocket(url: string, protocols: string[], origin: string): Promise<WebSocket> {
  return (await openUncut(() => new WebSocket(url, protocols, { origin }))).ws;
}

