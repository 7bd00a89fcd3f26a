import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { decode, encode } from '@msgpack/msgpack';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { HttpError } from '../../transport/http/errors.js';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import {
  CloseCode,
  defineWebSocketEndpoint,
  mountWebSocketEndpoint,
  type MountedWebSocketEndpoint,
  type WebSocketEndpointDefinition,
} from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { cutAfterUpgrade } from '../support/uws-upgrade-cut.js';
import { waitFor } from '../support/wait.js';

/**
 * The WebSocket endpoint framework against a real uWS server on loopback, with the `ws` package as the client.
 */
const JSON_PROTOCOL = 'registry.v1.json';
const MSGPACK_PROTOCOL = 'registry.v1.msgpack';
const AUTH = { authorization: 'Bearer good' };
const MAX_MESSAGE = 1024;
const MAX_BACKPRESSURE = 256 * 1024;
const BLOB_BYTES = 64 * 1024;
const BIG = 2n ** 60n;

const inbound = z.discriminatedUnion('type', [
  z.object({ type: z.literal('echo'), text: z.string(), n: z.number().optional() }),
  z.object({ type: z.literal('fail') }),
  z.object({ type: z.literal('refuse') }),
  z.object({ type: z.literal('flood'), spread: z.boolean().optional() }),
  z.object({ type: z.literal('burst'), n: z.number() }),
]);
type Inbound = z.infer<typeof inbound>;
type Outbound =
  | { type: 'echo'; text: string; n?: number; user: string; codec: string; big: bigint }
  | { type: 'blob'; data: string }
  | { type: 'hello' };
interface User {
  readonly name: string;
}

// --- what the server side observed ---------------------------------------------------------------------------------
const closes: Array<{ name: string; code: number }> = [];
const logs: Array<{ level: number; msg: string; endpoint?: string }> = [];
const floods = new Map<string, { sent: number; maxBuffered: number; closedBySend: boolean }>();
const lastFlood = (): { sent: number; maxBuffered: number; closedBySend: boolean } | undefined => [...floods.values()].at(-1);

const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });

function endpoint(
  overrides: Partial<WebSocketEndpointDefinition<User, Inbound, Outbound>> & { name: string; path: string },
): WebSocketEndpointDefinition<User, Inbound, Outbound> {
  return {
    maxMessageBytes: MAX_MESSAGE,
    maxBackpressureBytes: MAX_BACKPRESSURE,
    idleTimeoutSeconds: 8,
    inbound,
    async authenticate(upgrade) {
      await new Promise((resolve) => setTimeout(resolve, 5)); // a real await: the uWS request is gone by now
      if (upgrade.headers.authorization !== 'Bearer good') {
        throw new HttpError(401, 'unauthenticated', 'a valid bearer token is required', {
          family: 'runtime',
          headers: { 'www-authenticate': 'Bearer' },
        });
      }
      return { name: 'alice' };
    },
    async onMessage(conn, message) {
      switch (message.type) {
        case 'echo':
          conn.send({ ...message, user: conn.user.name, codec: conn.codec, big: BIG });
          return;
        case 'refuse':
          throw new HttpError(409, 'echo_refused', 'this message is refused on purpose');
        case 'fail':
          await Promise.resolve();
          throw new Error('handler exploded');
        case 'burst':
          // Past an await, as replies released by a commit are: outside uWS's handler and its cork.
          await new Promise((resolve) => setTimeout(resolve, 1));
          for (let i = 0; i < message.n; i += 1) conn.send({ type: 'blob', data: `#${i}` });
          conn.close(4000, 'burst sent');
          return;
        case 'flood': {
          const result = { sent: 0, maxBuffered: 0, closedBySend: false };
          floods.set(conn.id, result);
          const data = 'x'.repeat(BLOB_BYTES);
          for (let i = 0; i < 2_000; i += 1) {
            // Spread: one send per turn of the event loop, each flushed by the connection's own microtask.
            if (message.spread) await new Promise((resolve) => setImmediate(resolve));
            result.maxBuffered = Math.max(result.maxBuffered, conn.bufferedBytes());
            if (!conn.send({ type: 'blob', data })) break;
            result.sent += 1;
          }
          result.closedBySend = conn.closed;
          return;
        }
      }
    },
    ...overrides,
  };
}

let app: TemplatedApp;
let port = 0;
const mounted: MountedWebSocketEndpoint[] = [];
const clients: WebSocket[] = [];

test.before(async () => {
  app = uws.App();
  const deps = {
    logger,
    newRequestId: () => `req_${randomUUID()}`,
    observer: { opened: () => undefined, closed: (name: string, code: number) => void closes.push({ name, code }) },
  };
  const control = defineWebSocketEndpoint<User, never, Outbound>({
    ...endpoint({ name: 'control', path: '/control' }),
    inbound: null,
    onMessage: undefined,
    onOpen: (conn) => void conn.send({ type: 'hello' }),
  });
  for (const definition of [
    defineWebSocketEndpoint(endpoint({ name: 'echo', path: '/echo' })),
    defineWebSocketEndpoint(endpoint({ name: 'slow', path: '/slow' })),
    defineWebSocketEndpoint(endpoint({ name: 'limited', path: '/limited', messagesPerMinute: 5 })),
    defineWebSocketEndpoint(endpoint({ name: 'draining', path: '/draining' })),
  ]) {
    mounted.push(mountWebSocketEndpoint(app, definition, deps));
  }
  mounted.push(mountWebSocketEndpoint(app, control, deps));
  // onOpen failing after the upgrade: a store outage (HttpError 503), and a bug.
  for (const [name, failure] of [
    ['unready', () => new HttpError(503, 'store_unavailable', 'the stores did not answer')],
    ['broken', () => new Error('bug in onOpen')],
  ] as const) {
    const failing = defineWebSocketEndpoint<User, never, Outbound>({
      ...endpoint({ name, path: `/${name}` }),
      inbound: null,
      onMessage: undefined,
      onOpen: async () => {
        await Promise.resolve();
        throw failure();
      },
    });
    mounted.push(mountWebSocketEndpoint(app, failing, deps));
  }
  port = await listenOnLoopback(app);
});

test.after(() => {
  for (const client of clients) client.terminate();
  for (const endpoint of mounted) endpoint.shutdown();
  closeApp(app);
});

// --- client helpers -----------------------------------------------------------------------------------------------
interface Received {
  readonly isBinary: boolean;
  readonly value: Record<string, unknown>;
}

interface Client {
  readonly ws: WebSocket;
  readonly received: Received[];
  pings: number;
  closed?: { code: number; reason: string };
  readonly errors: string[];
}

/** Opens a client; one cut by uWS right after its upgrade is opened again (see cutAfterUpgrade). */
async function openClient(path: string, protocols?: string[], headers: Record<string, string> = AUTH): Promise<Client> {
  for (let attempt = 1; ; attempt++) {
    const client = await openClientOnce(path, protocols, headers);
    const closed = client.closed ? Promise.resolve(client.closed.code) : new Promise<number>((resolve) => client.ws.once('close', resolve));
    if (attempt === 3 || !(await cutAfterUpgrade(client.ws, closed))) return client;
  }
}

function openClientOnce(path: string, protocols: string[] | undefined, headers: Record<string, string>): Promise<Client> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, protocols, { headers });
  clients.push(ws);
  const client: Client = { ws, received: [], pings: 0, errors: [] };
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    const value = (isBinary ? decode(data, { useBigInt64: true }) : JSON.parse(data.toString('utf8'))) as Record<string, unknown>;
    client.received.push({ isBinary, value });
  });
  ws.on('ping', () => (client.pings += 1));
  ws.on('close', (code: number, reason: Buffer) => (client.closed = { code, reason: reason.toString('utf8') }));
  ws.on('error', (error) => client.errors.push(error.message));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('error', reject);
  });
}

async function nextMessage(client: Client, index: number): Promise<Received> {
  return waitFor(() => client.received[index], `message #${index}`);
}

async function closeOf(client: Client): Promise<{ code: number; reason: string }> {
  return waitFor(() => client.closed, 'the connection to close');
}

/** An upgrade the server is expected to refuse: its status, headers and parsed body. */
function refusedUpgrade(
  path: string,
  protocols: string[] | undefined,
  headers: Record<string, string>,
): Promise<{ status: number; headers: IncomingMessage['headers']; body: Record<string, unknown> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, protocols, { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => reject(new Error('the upgrade was accepted')));
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      res.on('end', () => {
        ws.terminate();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) as Record<string, unknown> });
      });
    });
    ws.once('error', (error) => reject(error));
  });
}

// --- tests --------------------------------------------------------------------------------------------------------
test('JSON subprotocol: text frames both ways, user and codec on the connection, bigint as a decimal string', async () => {
  const client = await openClient('/echo', [JSON_PROTOCOL]);
  assert.is(client.ws.protocol, JSON_PROTOCOL);
  client.ws.send(JSON.stringify({ type: 'echo', text: 'héllo', n: 1.5 }));
  const reply = await nextMessage(client, 0);
  assert.is(reply.isBinary, false);
  assert.equal(reply.value, { type: 'echo', text: 'héllo', n: 1.5, user: 'alice', codec: JSON_PROTOCOL, big: BIG.toString() });
  client.ws.close(1000);
});

test('msgpack subprotocol: binary frames both ways, int64 inbound read as number, bigint outbound as int64', async () => {
  const client = await openClient('/echo', [MSGPACK_PROTOCOL]);
  assert.is(client.ws.protocol, MSGPACK_PROTOCOL);
  const now = Date.now(); // above 2^32: the client's encoder writes it as uint64
  client.ws.send(encode({ type: 'echo', text: 'héllo', n: now }));
  const reply = await nextMessage(client, 0);
  assert.is(reply.isBinary, true);
  assert.equal(reply.value, { type: 'echo', text: 'héllo', n: now, user: 'alice', codec: MSGPACK_PROTOCOL, big: BIG });
  client.ws.close(1000);
});

test("the client's preference order decides among supported subprotocols", async () => {
  const msgpackFirst = await openClient('/echo', [MSGPACK_PROTOCOL, JSON_PROTOCOL]);
  assert.is(msgpackFirst.ws.protocol, MSGPACK_PROTOCOL);
  const unknownFirst = await openClient('/echo', ['registry.v0.xml', JSON_PROTOCOL, MSGPACK_PROTOCOL]);
  assert.is(unknownFirst.ws.protocol, JSON_PROTOCOL);
  unknownFirst.ws.send(JSON.stringify({ type: 'echo', text: 'x' }));
  assert.is((await nextMessage(unknownFirst, 0)).isBinary, false);
  msgpackFirst.ws.close(1000);
  unknownFirst.ws.close(1000);
});

test('no Sec-WebSocket-Protocol header: JSON, and no subprotocol echoed', async () => {
  const client = await openClient('/echo');
  assert.is(client.ws.protocol, '');
  client.ws.send(JSON.stringify({ type: 'echo', text: 'plain' }));
  const reply = await nextMessage(client, 0);
  assert.is(reply.isBinary, false);
  assert.is(reply.value.codec, JSON_PROTOCOL);
  client.ws.close(1000);
});

test('only unsupported subprotocols: the upgrade is refused with 400 unsupported_subprotocol', async () => {
  const refused = await refusedUpgrade('/echo', ['registry.v0.xml', 'graphql-ws'], AUTH);
  assert.is(refused.status, 400);
  assert.is(refused.headers['content-type'], 'application/problem+json');
  assert.is(refused.body.code, 'unsupported_subprotocol');
  assert.is(refused.body.requestId, refused.headers['x-request-id']);
  assert.match(String(refused.body.detail), `${JSON_PROTOCOL}, ${MSGPACK_PROTOCOL}`);
});

test('a plain GET of a WebSocket path (no handshake): 426 websocket_upgrade_required with Upgrade: websocket', async () => {
  const res = await fetch(`http://127.0.0.1:${port}/echo`);
  assert.is(res.status, 426);
  assert.is(res.headers.get('upgrade'), 'websocket');
  assert.is(res.headers.get('content-type'), 'application/problem+json');
  const body = (await res.json()) as Record<string, unknown>;
  assert.is(body.code, 'websocket_upgrade_required');
  assert.is(body.requestId, res.headers.get('x-request-id'));
  const head = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'HEAD' });
  assert.is(head.status, 426);
  assert.is((await head.arrayBuffer()).byteLength, 0);
  // Any other method: the path exists, so 405 with what it allows, not the 404 of an unknown path.
  const post = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: '{}' });
  assert.is(post.status, 405);
  assert.is(post.headers.get('allow'), 'GET, HEAD');
  assert.is(((await post.json()) as Record<string, unknown>).code, 'method_not_allowed');
  // The handshake on the same path still opens.
  const client = await openClient('/echo', [JSON_PROTOCOL]);
  client.ws.close(1000);
});

test('authenticate throwing HttpError(401): the upgrade is refused with a problem+json 401', async () => {
  const refused = await refusedUpgrade('/echo', [JSON_PROTOCOL], { authorization: 'Bearer bad' });
  assert.is(refused.status, 401);
  assert.is(refused.headers['content-type'], 'application/problem+json');
  assert.is(refused.headers['www-authenticate'], 'Bearer');
  assert.is(refused.body.code, 'unauthenticated');
  assert.is(refused.body.status, 401);
  assert.ok(typeof refused.body.requestId === 'string' && refused.body.requestId.startsWith('req_'));
  assert.is(refused.body.requestId, refused.headers['x-request-id']);
});

test('a message that fails the inbound schema, holds text Postgres cannot keep or a `__proto__` member, gets a validation_failed error and the connection stays open', async () => {
  const client = await openClient('/echo', [JSON_PROTOCOL]);
  client.ws.send(JSON.stringify({ type: 'echo', text: 42 }));
  const error = await nextMessage(client, 0);
  assert.is(error.value.type, 'error');
  assert.is(error.value.code, 'validation_failed');
  const details = error.value.details as Array<{ pointer: string; in: string }>;
  assert.equal(
    details.map((d) => [d.pointer, d.in]),
    [['/text', 'body']],
  );
  // Text Postgres cannot keep is refused the same way, before any handler could store it: NUL, a lone surrogate
  // (written as JSON escapes: a client's UTF-8 encoder would have replaced a real one).
  client.ws.send('{"type":"echo","text":"a\\u0000b"}');
  client.ws.send('{"type":"echo","text":"ok","\\ud800":1}');
  for (const [index, pointer] of [[1, '/text'], [2, '/\ud800']] as const) {
    const refused = await nextMessage(client, index);
    assert.is(refused.value.code, 'validation_failed');
    assert.equal(refused.value.details, [{ pointer, in: 'body', code: 'unstorable_text', message: 'contains U+0000 or an unpaired UTF-16 surrogate' }]);
  }
  // A `__proto__` member (JSON.parse makes it an own member the schema never sees), plain or escaped, at any depth.
  client.ws.send('{"type":"echo","text":"x","__proto__":{"admin":true}}');
  client.ws.send('{"type":"echo","text":"x","extra":[{"\\u005f_proto__":1}]}');
  for (const [index, pointer] of [[3, '/__proto__'], [4, '/extra/0/__proto__']] as const) {
    const refused = await nextMessage(client, index);
    assert.is(refused.value.code, 'validation_failed');
    assert.equal((refused.value.details as Array<{ pointer: string }>).map((d) => d.pointer), [pointer]);
  }
  client.ws.send(JSON.stringify({ type: 'echo', text: 'still here' }));
  assert.is((await nextMessage(client, 5)).value.text, 'still here');
  assert.is(client.closed, undefined);
  client.ws.close(1000);
});

test('frames the codec cannot read: wrong frame type closes 1003, undecodable bytes close 1007', async () => {
  const binaryOnJson = await openClient('/echo', [JSON_PROTOCOL]);
  binaryOnJson.ws.send(Buffer.from(JSON.stringify({ type: 'echo', text: 'x' })), { binary: true });
  assert.is((await closeOf(binaryOnJson)).code, CloseCode.unsupportedFrame);

  const brokenJson = await openClient('/echo', [JSON_PROTOCOL]);
  brokenJson.ws.send('{"type": "echo", ');
  assert.is((await closeOf(brokenJson)).code, CloseCode.undecodable);

  const brokenMsgpack = await openClient('/echo', [MSGPACK_PROTOCOL]);
  brokenMsgpack.ws.send(Buffer.from([0xc1]), { binary: true }); // 0xc1 is never used in msgpack
  assert.is((await closeOf(brokenMsgpack)).code, CloseCode.undecodable);

  // Nested `array 16` headers, each declaring 65,535 elements that never come (test/transport/msgpack-scan.test.ts
  // shows it is refused before the decoder, which would pre-allocate by declared length).
  const bomb = await openClient('/echo', [MSGPACK_PROTOCOL]);
  bomb.ws.send(Buffer.alloc(Math.floor((MAX_MESSAGE - 1) / 3) * 3, Buffer.from([0xdc, 0xff, 0xff])), { binary: true });
  assert.is((await closeOf(bomb)).code, CloseCode.undecodable);
  const after = await openClient('/echo', [MSGPACK_PROTOCOL]);
  after.ws.send(encode({ type: 'echo', text: 'still serving' }));
  assert.is((await nextMessage(after, 0)).value.text, 'still serving');
  after.ws.close(1000);
});

test('inbound: null refuses any client message with 1008', async () => {
  const client = await openClient('/control', [MSGPACK_PROTOCOL]);
  assert.equal((await nextMessage(client, 0)).value, { type: 'hello' });
  client.ws.send(encode({ type: 'echo', text: 'may I?' }));
  const closed = await closeOf(client);
  assert.is(closed.code, CloseCode.readOnly, JSON.stringify({ closed, errors: client.errors, closes: closes.slice(-3) }));
  assert.match(closed.reason, 'accepts no client messages');
  await waitFor(() => closes.some((c) => c.name === 'control' && c.code === CloseCode.readOnly), 'observer close');
});

test('oversized messages close with 1009 (a clean close frame up to uWS’s cut-off, a reported 1009 beyond it)', async () => {
  const tooBig = (): number => closes.filter((c) => c.name === 'echo' && c.code === 1009).length;
  const before = tooBig();
  const slightly = await openClient('/echo', [JSON_PROTOCOL]);
  slightly.ws.send(JSON.stringify({ type: 'echo', text: 'x'.repeat(MAX_MESSAGE) }));
  const closed = await closeOf(slightly);
  assert.is(closed.code, 1009);
  assert.match(closed.reason, `over ${MAX_MESSAGE} bytes`);

  const grossly = await openClient('/echo', [JSON_PROTOCOL]);
  grossly.ws.send('x'.repeat(MAX_MESSAGE * 4));
  // uWS cuts the TCP connection without a close frame; the client can only see an abnormal closure.
  assert.is((await closeOf(grossly)).code, 1006);
  await waitFor(
    () => tooBig() === before + 2,
    'both closes reported as 1009',
  );
});

for (const spread of [false, true]) {
  const how = spread ? 'one send per event-loop turn' : 'all sends in one handler';
  test(`a client that stops reading is closed as a slow consumer and the buffer stays bounded (${how})`, async () => {
    const slowCloses = (): number => closes.filter((c) => c.name === 'slow' && c.code === CloseCode.slowConsumer).length;
    const before = slowCloses();
    const floodsBefore = floods.size;
    const client = await openClient('/slow', [JSON_PROTOCOL]);
    const slow = mounted.find((m) => m.name === 'slow');
    assert.is(slow?.connectionCount(), 1);
    (client.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    client.ws.send(JSON.stringify({ type: 'flood', spread }));
    const result = await waitFor(() => floods.size === floodsBefore + 1 && lastFlood()?.closedBySend && lastFlood(), 'the flood to end', 10_000);
    assert.ok(result.sent < 2_000, `stopped after ${result.sent} messages`);
    assert.ok(
      result.maxBuffered <= MAX_BACKPRESSURE + BLOB_BYTES + 64,
      `buffered at most the limit plus one message (saw ${result.maxBuffered})`,
    );
    await waitFor(() => slowCloses() === before + 1, 'observer 4008');
    assert.is(slow?.connectionCount(), 0);
    (client.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await closeOf(client);
  });
}

test('messages sent outside a handler leave in order, and all of them before a close that follows', async () => {
  const client = await openClient('/echo', [JSON_PROTOCOL]);
  client.ws.send(JSON.stringify({ type: 'burst', n: 50 }));
  const closed = await closeOf(client);
  assert.equal(closed, { code: 4000, reason: 'burst sent' });
  assert.equal(
    client.received.map((m) => m.value.data),
    Array.from({ length: 50 }, (_, i) => `#${i}`),
  );
});

test('heartbeats: the server pings an idle client', async () => {
  const client = await openClient('/echo', [JSON_PROTOCOL]);
  // uWS pings after half of idleTimeoutSeconds (8 s) of silence, and closes a client silent for all of it: waiting
  // past 8 s (a loaded machine's timers run late) still tells a ping from an idle close.
  await waitFor(() => client.pings > 0 || client.closed, 'a ping', 20_000);
  assert.ok(client.pings > 0, `no ping; closed ${JSON.stringify(client.closed)}`);
  assert.is(client.closed, undefined);
  client.ws.close(1000);
});

test('over messagesPerMinute: a rate_limited error, then close 4029', async () => {
  const client = await openClient('/limited', [JSON_PROTOCOL]);
  for (let i = 0; i < 6; i += 1) client.ws.send(JSON.stringify({ type: 'echo', text: `#${i}` }));
  const closed = await closeOf(client);
  assert.is(closed.code, CloseCode.rateLimited);
  assert.equal(
    client.received.map((m) => m.value.type === 'error' ? m.value.code : m.value.text),
    ['#0', '#1', '#2', '#3', '#4', 'rate_limited'],
  );
  await waitFor(() => closes.some((c) => c.name === 'limited' && c.code === CloseCode.rateLimited), 'observer 4029');
});

test('a handler that throws (async) is logged, the client gets an error message, and nothing else breaks', async () => {
  const client = await openClient('/echo', [JSON_PROTOCOL]);
  client.ws.send(JSON.stringify({ type: 'fail' }));
  const internal = await nextMessage(client, 0);
  const { requestId, ...rest } = internal.value as { requestId: string };
  assert.equal(rest, { type: 'error', code: 'internal_error', message: 'the server failed to handle the message' });
  // The error's request id leads to its log line, stack included.
  assert.ok(logs.some((l) => l.level >= 50 && l.msg === 'message handler failed' && l.endpoint === 'echo' && (l as { requestId?: string }).requestId === requestId));

  client.ws.send(JSON.stringify({ type: 'refuse' }));
  const refused = await nextMessage(client, 1);
  const { requestId: refusalId, ...refusal } = refused.value as { requestId: string };
  assert.equal(refusal, { type: 'error', code: 'echo_refused', message: 'this message is refused on purpose' });
  assert.match(refusalId, /^req_/);
  assert.is.not(refusalId, requestId, 'each error has its own id');

  client.ws.send(JSON.stringify({ type: 'echo', text: 'alive' }));
  assert.is((await nextMessage(client, 2)).value.text, 'alive');
  assert.is(client.closed, undefined);
  client.ws.close(1000);
});

test('an onOpen failure is said in-band with its code and request id before the close: 1013 for a 503, else 1011', async () => {
  const unready = await openClient('/unready', [JSON_PROTOCOL]);
  const { requestId, ...refusal } = (await nextMessage(unready, 0)).value as { requestId: string };
  assert.equal(refusal, { type: 'error', code: 'store_unavailable', message: 'the stores did not answer' });
  assert.match(requestId, /^req_/);
  assert.equal(await closeOf(unready), { code: CloseCode.tryAgainLater, reason: 'store_unavailable' });
  assert.ok(logs.some((l) => l.msg === 'onOpen refused the connection' && (l as { requestId?: string }).requestId === requestId));

  const broken = await openClient('/broken', [JSON_PROTOCOL]);
  const { requestId: brokenId, ...internal } = (await nextMessage(broken, 0)).value as { requestId: string };
  assert.equal(internal, { type: 'error', code: 'internal_error', message: 'the server failed to open the connection' });
  assert.is((await closeOf(broken)).code, CloseCode.internalError);
  assert.ok(logs.some((l) => l.level >= 50 && l.msg === 'onOpen failed' && (l as { requestId?: string }).requestId === brokenId));
});

test('shutdown closes open connections with 1001 and refuses new upgrades with the HTTP drain\'s 503 server_draining', async () => {
  const client = await openClient('/draining', [JSON_PROTOCOL]);
  const draining = mounted.find((m) => m.name === 'draining');
  draining?.shutdown();
  assert.equal(await closeOf(client), { code: 1001, reason: 'server shutting down' });
  const refused = await refusedUpgrade('/draining', [JSON_PROTOCOL], AUTH);
  assert.is(refused.status, 503);
  // What every other request on an open connection is told while the node drains: retry, on another node or shortly.
  assert.is(refused.body.code, 'server_draining');
  assert.is(refused.headers['retry-after'], '1');
  assert.is(refused.headers.connection, 'close');
});

test('definitions that uWS would abort the process for are refused up front', () => {
  const base = endpoint({ name: 'bad', path: '/bad' });
  assert.throws(() => defineWebSocketEndpoint({ ...base, idleTimeoutSeconds: 5 }), /idleTimeoutSeconds/);
  assert.throws(() => defineWebSocketEndpoint({ ...base, idleTimeoutSeconds: 10 }), /multiple of 4/);
  assert.throws(() => defineWebSocketEndpoint({ ...base, maxBackpressureBytes: 0 }), /maxBackpressureBytes/);
  assert.ok(Object.isFrozen(defineWebSocketEndpoint(base)));
});

test.run();
