import { randomBytes, randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { CloseCode, defineWebSocketEndpoint, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { waitFor } from '../support/wait.js';

/**
 * uWS answers every ping with a pong of the same payload, queued like any frame for a client that does not read; the
 * endpoints set no uWS backpressure limit of their own (conn.send enforces maxBackpressureBytes), so nothing bounded
 * the pongs: a client sending pings and never reading made the server hold a gigabyte in seconds, on an open socket.
 * Raw TCP client (node:net), so nothing reads on its behalf.
 */
const LIMIT = 64 * 1024;
const closes: number[] = [];
let app: TemplatedApp;
let port = 0;
let mounted: MountedWebSocketEndpoint;
const sockets: Socket[] = [];

test.before(async () => {
  app = uws.App();
  const endpoint = defineWebSocketEndpoint<{ name: string }, { type: 'echo' }, { type: 'echo' }>({
    path: '/pings',
    name: 'pings',
    maxMessageBytes: 1024,
    maxBackpressureBytes: LIMIT,
    idleTimeoutSeconds: 32,
    inbound: z.object({ type: z.literal('echo') }),
    authenticate: async () => ({ name: 'carol' }),
    onMessage: (conn, message) => void conn.send(message),
    onClose: (_conn, code) => void closes.push(code),
  });
  mounted = mountWebSocketEndpoint(app, endpoint, { logger: pino({ level: 'silent' }), newRequestId: () => `req_${randomUUID()}` });
  port = await listenOnLoopback(app);
});

test.after(() => {
  for (const socket of sockets) socket.destroy();
  mounted.shutdown();
  closeApp(app);
});

/** A masked client frame (RFC 6455 5.3). */
function frame(opcode: number, payload: Buffer): Buffer {
  const key = randomBytes(4);
  const masked = Buffer.from(payload.map((byte, i) => byte ^ key[i % 4]!));
  return Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | payload.length]), key, masked]);
}

interface RawClient {
  readonly socket: Socket;
  /** Bytes received after the handshake. */
  received(): number;
}

/** Completes the handshake over a raw socket; from then on counts what arrives (when the socket is read at all). */
function open(): Promise<RawClient> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  let head = '';
  let received = 0;
  return new Promise((resolve) => {
    socket.on('data', (data: Buffer) => {
      if (head.endsWith('\r\n\r\n')) {
        received += data.length;
        return;
      }
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      received += head.length - end - 4;
      head = head.slice(0, end + 4);
      resolve({ socket, received: () => received });
    });
    socket.write(
      `GET /pings HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
  });
}

const PING = frame(0x9, Buffer.alloc(125, 0x70));
/** A pong frame from the server: 2 bytes of header and the ping's payload. */
const PONG_BYTES = 2 + 125;

test('a client that sends pings and never reads the pongs is closed as a slow consumer (4008)', async () => {
  const before = closes.filter((c) => c === CloseCode.slowConsumer).length;
  const client = await open();
  client.socket.pause();
  const batch = Buffer.concat(Array.from({ length: 1_000 }, () => PING));
  // 512 times the limit in pongs, far more than loopback's socket buffers hold, written as the server takes them.
  for (let sent = 0; sent < 512 * LIMIT && !client.socket.destroyed; sent += 1_000 * PONG_BYTES) {
    if (closes.filter((c) => c === CloseCode.slowConsumer).length > before) break;
    if (!client.socket.write(batch)) {
      await Promise.race([new Promise((resolve) => client.socket.once('drain', resolve)), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    }
  }
  assert.is(closes.filter((c) => c === CloseCode.slowConsumer).length, before + 1, 'the server closed the client with 4008');
});

test('a client that reads gets a pong for every ping and stays open', async () => {
  const before = closes.length;
  const client = await open();
  const pings = 2_000;
  client.socket.write(Buffer.concat(Array.from({ length: pings }, () => PING)));
  await waitFor(() => client.received() >= pings * PONG_BYTES || undefined, 'every pong');
  assert.is(client.received(), pings * PONG_BYTES);
  assert.is(closes.length, before, 'nothing closed');
  client.socket.destroy();
});

test.run();
