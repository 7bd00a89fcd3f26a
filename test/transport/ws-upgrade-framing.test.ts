import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { createLogger } from '../../server/logger.js';
import { HttpError } from '../../transport/http/errors.js';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { defineWebSocketEndpoint, mountWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback, rawExchange } from '../support/http.js';

/**
 * A WebSocket endpoint's path answers HTTP too (426 without the handshake, 405 for another method, an upgrade refused),
 * beside the gateway and not through it, so it refuses what the gateway refuses before any operation: framing uWS reads
 * more leniently than a proxy in front may (differing Content-Lengths, a coding besides chunked), where the bytes a
 * proxy takes for this request's body would be served as a request of their own; and a body, which no WebSocket request
 * takes and which uWS would read to its end. Such an answer closes the connection.
 */
const TOKEN = 'registry.bearer.good';
let app: TemplatedApp;
let port: number;

test.before(async () => {
  app = uws.App();
  const endpoint = defineWebSocketEndpoint<{ readonly who: string }, never, never>({
    path: '/v1/test/socket',
    name: 'test-framing',
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: 8,
    inbound: null,
    async authenticate(request) {
      if (!(request.headers['sec-websocket-protocol'] ?? '').includes(TOKEN)) throw new HttpError(401, 'token_invalid', 'a valid token is required');
      return { who: 'someone' };
    },
  });
  mountWebSocketEndpoint(app, endpoint, { logger: createLogger('silent'), newRequestId: () => `req_${randomUUID()}` });
  port = await listenOnLoopback(app);
});
test.after(() => closeApp(app));

const exchange = (request: string, later = '', ms = 2_000) => rawExchange(port, request, { later, ms });

const handshake = `Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: registry.v1.json, ${TOKEN}\r\n`;
const smuggled = 'GET /v1/test/socket HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
const answers = (text: string): number => text.match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0;

test('Content-Length values that differ, or a coding besides chunked: 400, the connection closes, and what follows is never served', async () => {
  const requests = [];
  for (const [method, extra] of [['GET', ''], ['GET', handshake], ['HEAD', ''], ['POST', '']] as const) {
    requests.push([`${method} lengths`, `${method} /v1/test/socket HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}Content-Length: 5\r\nContent-Length: ${5 + smuggled.length}\r\n\r\nhello`]);
  }
  requests.push(['GET coding', `GET /v1/test/socket HTTP/1.1\r\nHost: 127.0.0.1\r\n${handshake}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`]);
  for (const [name, request] of requests) {
    const { text, closed } = await exchange(request!, smuggled);
    assert.match(text, /^HTTP\/1\.1 400 /, name);
    assert.match(text.toLowerCase(), /\r\nx-request-id: req_/, name);
    assert.is(answers(text), 1, `${name}: what followed was served as a request of its own`);
    assert.ok(closed, `${name}: the connection stayed open`);
  }
});

test('a body sent to a WebSocket path is not read: 426, 405 or 400 for a handshake, and the connection closes', async () => {
  for (const [method, extra, status] of [['GET', '', '426'], ['POST', '', '405'], ['GET', handshake, '400']] as const) {
    const request = `${method} /v1/test/socket HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}Content-Length: 500000000\r\n\r\n`;
    const { text, closed } = await exchange(request, 'x'.repeat(64 * 1024));
    assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), `${method} ${status}`);
    assert.match(text.toLowerCase(), /\r\nconnection: close\r\n/, `${method} ${status}`);
    assert.ok(closed, `${method} ${status}: the connection stayed open, reading the body`);
  }
});

test('without a body the answers are as before: 426 keeps its connection, and a handshake opens', async () => {
  const { text, closed } = await exchange('GET /v1/test/socket HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', '', 800);
  assert.match(text, /^HTTP\/1\.1 426 /);
  assert.is(closed, false);
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/test/socket`, ['registry.v1.json', TOKEN]);
  await new Promise<void>((resolve, reject) => {
    ws.on('open', () => resolve());
    ws.on('error', reject);
  });
  ws.close();
});

test.run();
