import { randomUUID } from 'node:crypto';
import { decode, encode } from '@msgpack/msgpack';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { defineWebSocketEndpoint, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { openUncut } from '../support/uws-upgrade-cut.js';

/**
 * maxOutboundMessageBytes: a server message over it is a bug of the server, never sent (a client that set its own
 * maximum message size to the limit would be cut off by it) but logged at error level, with the endpoint's stand-in
 * sent instead; a framework error whose details would take it over goes without them. Real uWS, `ws` client holding
 * to the limit itself, both codecs.
 */
const LIMIT = 512;
type Out = { type: 'blob'; text: string } | { type: 'answer'; id: string; ok: boolean; text?: string } | { type: 'error'; code: string; message: string; requestId: string; details?: unknown[] };
const logs: Array<{ level: number; msg: string; type?: string; bytes?: number; limit?: number }> = [];
let app: TemplatedApp;
let port = 0;
let mounted: MountedWebSocketEndpoint;
const clients: WebSocket[] = [];

test.before(async () => {
  app = uws.App();
  const endpoint = defineWebSocketEndpoint<{ name: string }, { type: 'blob'; bytes: number; id: string } | { type: 'strict'; id: string }, Out>({
    path: '/out',
    name: 'out',
    maxMessageBytes: 16 * 1024,
    maxOutboundMessageBytes: LIMIT,
    maxBackpressureBytes: 1024 * 1024,
    idleTimeoutSeconds: 32,
    inbound: z.discriminatedUnion('type', [
      z.strictObject({ type: z.literal('blob'), bytes: z.number().int().nonnegative(), id: z.string() }),
      z.strictObject({ type: z.literal('strict'), id: z.string() }),
    ]),
    authenticate: async () => ({ name: 'bob' }),
    onMessage: (conn, message) => {
      if (message.type !== 'blob') return;
      conn.send({ type: 'blob', text: 'x'.repeat(message.bytes) });
      conn.send({ type: 'answer', id: message.id, ok: true, text: 'y'.repeat(message.bytes) });
    },
    oversized: (_conn, message) => (message.type === 'answer' ? { type: 'answer', id: message.id, ok: false } : undefined),
  });
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
  mounted = mountWebSocketEndpoint(app, endpoint, { logger, newRequestId: () => `req_${randomUUID()}` });
  port = await listenOnLoopback(app);
});

test.after(() => {
  if (!mounted) return;
  for (const client of clients) client.terminate();
  mounted.shutdown();
  closeApp(app);
});

for (const codec of ['json', 'msgpack'] as const) {
  const protocol = codec === 'json' ? 'registry.v1.json' : 'registry.v1.msgpack';
  const pack = (message: unknown): string | Uint8Array => (codec === 'json' ? JSON.stringify(message) : encode(message));
  const unpack = (data: Buffer): Out => (codec === 'json' ? JSON.parse(String(data)) : decode(data)) as Out;

  /** Sends one message and collects what comes back until an `answer` or `error`, with each frame's size. */
  async function roundTrip(message: unknown): Promise<Array<{ message: Out; bytes: number }>> {
    const { ws, closed } = await openUncut(() => new WebSocket(`ws://127.0.0.1:${port}/out`, [protocol], { maxPayload: LIMIT }), (w) => void clients.push(w));
    const frames: Array<{ message: Out; bytes: number }> = [];
    const done = new Promise<void>((resolve) =>
      ws.on('message', (data: Buffer) => {
        const received = unpack(data);
        frames.push({ message: received, bytes: data.byteLength });
        if (received.type !== 'blob') resolve();
      }),
    );
    ws.send(pack(message));
    const outcome = await Promise.race([done.then(() => 'answered'), closed.then((code) => `closed ${code}`)]);
    ws.close();
    assert.is(outcome, 'answered');
    return frames;
  }

  test(`${codec}: messages within the limit are sent as they are`, async () => {
    const frames = await roundTrip({ type: 'blob', bytes: 100, id: 'a' });
    assert.equal(frames.map((f) => [f.message.type, f.message.type === 'answer' && f.message.ok]), [['blob', false], ['answer', true]]);
  });

  test(`${codec}: a message over the limit is not sent but logged as an error; the endpoint's stand-in goes instead`, async () => {
    logs.length = 0;
    const frames = await roundTrip({ type: 'blob', bytes: 2 * LIMIT, id: 'b' });
    assert.equal(frames.map((f) => f.message), [{ type: 'answer', id: 'b', ok: false }], 'the blob is dropped, the answer replaced');
    const errors = logs.filter((l) => l.level >= 50 && l.msg === 'outbound message over maxOutboundMessageBytes not sent');
    assert.equal(errors.map((l) => [l.type, l.limit]), [['blob', LIMIT], ['answer', LIMIT]]);
    assert.ok(errors.every((l) => (l.bytes ?? 0) > LIMIT));
  });

  test(`${codec}: a validation error whose details would pass the limit goes without them`, async () => {
    const unknownKeys = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`unexpected_member_${i}`, i]));
    const frames = await roundTrip({ type: 'strict', id: 'c', ...unknownKeys });
    assert.is(frames.length, 1);
    const [error] = frames;
    assert.is(error!.message.type, 'error');
    assert.is((error!.message as { code: string }).code, 'validation_failed');
    assert.is((error!.message as { details?: unknown }).details, undefined);
    assert.ok(error!.bytes <= LIMIT);
  });
}

test('a limit that is not a positive integer is refused at definition', () => {
  assert.throws(() =>
    defineWebSocketEndpoint({ path: '/x', name: 'x', maxMessageBytes: 1, maxOutboundMessageBytes: 0, maxBackpressureBytes: 1, idleTimeoutSeconds: 32, inbound: null, authenticate: async () => ({}) }),
  /maxOutboundMessageBytes/);
});

test.run();
