import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { CloseCode, defineWebSocketEndpoint, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { openUncut } from '../support/uws-upgrade-cut.js';

/**
 * The backpressure limit bounds a backlog, not a message: one answer larger than the limit (a presence list of a big
 * Environment, say) reaches a client that reads, and a client that stops reading is still closed as a slow consumer
 * once anything else is queued behind it. Real uWS server on loopback, `ws` client.
 */
const JSON_PROTOCOL = 'registry.v1.json';
const LIMIT = 64 * 1024;
/** Far more than loopback's socket buffers take at once, so uWS itself has to hold most of it. */
const LARGE = 16 * 1024 * 1024;

type Out = { type: 'blob'; text: string };
const closes: number[] = [];
let app: TemplatedApp;
let port = 0;
let mounted: MountedWebSocketEndpoint;
const clients: WebSocket[] = [];

test.before(async () => {
  app = uws.App();
  const endpoint = defineWebSocketEndpoint<{ name: string }, { type: 'blob'; bytes: number; times: number; tail?: number }, Out>({
    path: '/blob',
    name: 'blob',
    maxMessageBytes: 1024,
    maxBackpressureBytes: LIMIT,
    idleTimeoutSeconds: 32,
    inbound: z.object({ type: z.literal('blob'), bytes: z.number().int().positive(), times: z.number().int().positive(), tail: z.number().int().optional() }),
    authenticate: async () => ({ name: 'bob' }),
    onMessage: (conn, message) => {
      for (let i = 0; i < message.times; i++) if (!conn.send({ type: 'blob', text: 'x'.repeat(message.bytes) })) return;
      for (let i = 0; i < (message.tail ?? 0); i++) if (!conn.send({ type: 'blob', text: `tail ${i}` })) return;
    },
    onClose: (_conn, code) => void closes.push(code),
  });
  mounted = mountWebSocketEndpoint(app, endpoint, { logger: pino({ level: 'silent' }), newRequestId: () => `req_${randomUUID()}` });
  port = await listenOnLoopback(app);
});

test.after(() => {
  if (!mounted) return;
  for (const client of clients) client.terminate();
  mounted.shutdown();
  closeApp(app);
});

const open = (): Promise<{ ws: WebSocket; closed: Promise<number> }> =>
  openUncut(() => new WebSocket(`ws://127.0.0.1:${port}/blob`, [JSON_PROTOCOL], { maxPayload: 2 * LARGE }), (ws) => void clients.push(ws));

test('one message larger than the backpressure limit reaches a client that reads', async () => {
  const { ws, closed } = await open();
  const received = new Promise<number>((resolve) => ws.once('message', (data: Buffer) => resolve(data.length)));
  ws.send(JSON.stringify({ type: 'blob', bytes: LARGE, times: 1 }));
  const outcome = await Promise.race([received.then((n) => ({ received: n })), closed.then((code) => ({ closed: code }))]);
  assert.equal(outcome, { received: JSON.stringify({ type: 'blob', text: 'x'.repeat(LARGE) }).length });
  ws.close();
});

test('small messages sent right behind a large one reach a client that reads', async () => {
  const { ws, closed } = await open();
  const lengths: number[] = [];
  const all = new Promise<void>((resolve) => ws.on('message', (data: Buffer) => void (lengths.push(data.length) === 4 && resolve())));
  ws.send(JSON.stringify({ type: 'blob', bytes: LARGE, times: 1, tail: 3 }));
  // A later tick too: by then the large frame is still draining.
  const outcome = await Promise.race([all.then(() => 'received'), closed.then((code) => `closed ${code}`)]);
  assert.is(outcome, 'received');
  assert.is(lengths.length, 4);
  ws.close();
});

test('a client that does not read while large messages queue up behind one another is still closed as slow (4008)', async () => {
  const before = closes.filter((c) => c === CloseCode.slowConsumer).length;
  const { ws, closed } = await open();
  (ws as unknown as { _socket: { pause(): void } })._socket.pause();
  ws.send(JSON.stringify({ type: 'blob', bytes: LARGE, times: 4 }));
  const deadline = Date.now() + 10_000;
  while (closes.filter((c) => c === CloseCode.slowConsumer).length === before && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.is(closes.filter((c) => c === CloseCode.slowConsumer).length, before + 1, 'the server closed the non-reading client with 4008');
  ws.terminate();
  await closed;
});

test.run();
