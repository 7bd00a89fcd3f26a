import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { HttpError } from '../../transport/http/errors.js';
import { defineWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * The HTTP answers of a WebSocket path are requests like any other in /metrics: a spike of refused upgrades (a client
 * with a stale token, a proxy stripping the handshake) must show, under one operation per endpoint (uWS itself drops
 * a request whose method it does not know, so the method label stays bounded too).
 */
const guarded = defineWebSocketEndpoint({
  path: '/v1/test/guarded-socket',
  name: 'test-guarded',
  maxMessageBytes: 1024,
  maxBackpressureBytes: 64 * 1024,
  idleTimeoutSeconds: 16,
  inbound: null,
  authenticate: async (upgrade) => {
    if (upgrade.query !== 'token=good') throw new HttpError(401, 'token_invalid', 'a valid token is required');
    return { subject: 'someone' };
  },
});

let server: TestServer;
withTestServer(test, (started) => ({ server } = started), { sockets: (_services, mount) => mount(guarded) });

const socketUrl = (query: string) => `${server.url.replace('http', 'ws')}/v1/test/guarded-socket${query}`;

/** The status the handshake was answered with: 101 when it opened. */
function handshake(url: string, protocols: string[] = []): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', (error) => reject(error));
  });
}

const series = (status: number, method = 'GET') =>
  new RegExp(`registry_http_requests_total\\{method="${method}",operation="websocket:test-guarded",status="${status}"\\} (\\d+)`);

test('refused and accepted upgrades, and other HTTP answers of a WebSocket path, are counted by status', async () => {
  assert.is(await handshake(socketUrl('?token=bad')), 401);
  assert.is(await handshake(socketUrl('?token=bad')), 401);
  assert.is(await handshake(socketUrl('?token=good'), ['not-a-codec']), 400);
  assert.is(await handshake(socketUrl('?token=good')), 101);
  assert.is((await fetch(`${server.url}/v1/test/guarded-socket`)).status, 426);
  assert.is((await fetch(`${server.url}/v1/test/guarded-socket`, { method: 'DELETE' })).status, 405);
  const text = await waitFor(async () => {
    const body = await (await fetch(`${server.opsUrl}/metrics`)).text();
    return series(405, 'DELETE').test(body) ? body : undefined;
  }, 'the refusals to be counted');
  assert.is(series(401).exec(text)?.[1], '2', text);
  assert.is(series(400).exec(text)?.[1], '1');
  assert.is(series(101).exec(text)?.[1], '1');
  assert.is(series(426).exec(text)?.[1], '1');
  assert.match(text, /registry_http_request_duration_seconds_count\{operation="websocket:test-guarded"\} 6/);
});

test.run();
