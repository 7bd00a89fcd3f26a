import { randomBytes, randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { defineWebSocketEndpoint, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { cutAfterUpgrade } from '../support/uws-upgrade-cut.js';
import { waitFor } from '../support/wait.js';

/**
 * Heartbeats (endpoint.ts): uWS pings a silent peer and cuts one that did not answer, not even with a pong, by the end
 * of idleTimeoutSeconds; the endpoint reports 1006 and gives back what the connection held (onClose, the open count).
 * A peer that answers the pings stays open however long it says nothing else. Raw TCP for the peer that never answers:
 * every WebSocket library answers pings on its own.
 */
const IDLE_S = 8;
const closes: Array<{ code: number; reason: string }> = [];
let app: TemplatedApp;
let port = 0;
let mounted: MountedWebSocketEndpoint;
const sockets: Socket[] = [];

test.before(async () => {
  app = uws.App();
  const endpoint = defineWebSocketEndpoint<{ name: string }, { type: 'echo' }, { type: 'echo' }>({
    path: '/quiet',
    name: 'quiet',
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: IDLE_S,
    inbound: z.object({ type: z.literal('echo') }),
    authenticate: async () => ({ name: 'carol' }),
    onClose: (_conn, code, reason) => void closes.push({ code, reason }),
  });
  mounted = mountWebSocketEndpoint(app, endpoint, { logger: pino({ level: 'silent' }), newRequestId: () => `req_${randomUUID()}` });
  port = await listenOnLoopback(app);
});

test.after(() => {
  for (const socket of sockets) socket.destroy();
  mounted.shutdown();
  closeApp(app);
});

/** A peer that completes the handshake and reads whatever comes, but never answers a ping; resolves once upgraded. */
function deafPeer(): Promise<{ pings: () => number; ended: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  let head = '';
  let pings = 0;
  return new Promise((resolve) => {
    socket.on('data', (data: Buffer) => {
      if (!head.endsWith('\r\n\r\n')) {
        head += data.toString('latin1');
        if (head.includes('\r\n\r\n')) resolve({ pings: () => pings, ended });
        return;
      }
      // Server frames are unmasked; a ping is opcode 9 with FIN.
      if (data[0] === 0x89) pings += 1;
    });
    socket.write(
      `GET /quiet HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
  });
}

test('a peer that never answers the pings is cut by the end of the idle timeout, reported 1006; one that answers stays', async () => {
  let answering: WebSocket | undefined;
  for (let attempt = 1; attempt <= 3 && !answering; attempt++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/quiet`, ['registry.v1.json']);
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    await new Promise((resolve, reject) => ws.on('open', resolve).on('error', reject));
    if (!(await cutAfterUpgrade(ws, closed))) answering = ws;
  }
  assert.ok(answering, 'an answering peer opened');
  let answeringClosed = false;
  answering.on('close', () => (answeringClosed = true));
  const startedAt = Date.now();
  const deaf = await deafPeer();
  await waitFor(() => mounted.connectionCount() === 2 || undefined, 'both peers open');
  // uWS's timers run up to 4 s early or late; a loaded machine adds to that.
  await waitFor(() => closes.length > 0 || undefined, 'the deaf peer cut', (IDLE_S + 12) * 1_000);
  await deaf.ended;
  const elapsed = (Date.now() - startedAt) / 1_000;
  assert.ok(deaf.pings() >= 1, 'the server pinged the deaf peer before cutting it');
  assert.ok(elapsed >= IDLE_S - 4, `cut after ${elapsed} s, not before its idle timeout`);
  assert.equal(closes.map((c) => c.code), [1006]);
  assert.is(mounted.connectionCount(), 1, 'the cut peer is no longer counted open');
  // The answering peer, as silent otherwise, outlives two idle timeouts.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, 2 * IDLE_S * 1_000 - (Date.now() - startedAt))));
  assert.is(answeringClosed, false, 'the peer that answers the pings is still open');
  assert.is(closes.length, 1);
  answering.close();
});

test.run();
