import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { defineWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/** Socket endpoints plugged into the real server: counted in /metrics, told to go away on shutdown. */
const echo = defineWebSocketEndpoint({
  path: '/v1/test/echo-socket',
  name: 'test-echo',
  maxMessageBytes: 1024,
  maxBackpressureBytes: 64 * 1024,
  idleTimeoutSeconds: 16,
  inbound: z.strictObject({ type: z.literal('say'), text: z.string() }),
  authenticate: async () => ({ subject: 'anonymous' }),
  onMessage: (conn, message) => {
    conn.send({ type: 'said', text: message.text });
  },
});

let server: TestServer;

withTestServer(test, (started) => ({ server } = started), { sockets: (_services, mount) => mount(echo) });

test('close codes of the client\'s own are counted as one series, the protocol\'s and the server\'s by code', async () => {
  const open = async (): Promise<WebSocket> => {
    const client = new WebSocket(`${server.url.replace('http', 'ws')}/v1/test/echo-socket`, ['registry.v1.json']);
    await new Promise<void>((resolve, reject) => {
      client.once('open', () => resolve());
      client.once('error', reject);
    });
    return client;
  };
  for (const code of [4001, 4002, 4999, 1000]) (await open()).close(code);
  const counted = await waitFor(() => {
    const text = server.services.metrics.render();
    return /registry_websockets_closed_total\{code="client_other",endpoint="test-echo"\} 3/.test(text) && /code="1000",endpoint="test-echo"\} 1/.test(text) ? text : undefined;
  }, 'the closes to be counted');
  assert.not.match(counted, /code="400[12]"/);
});

test('a mounted endpoint serves, is counted as an open socket, and is closed with 1001 on shutdown', async () => {
  const client = new WebSocket(`${server.url.replace('http', 'ws')}/v1/test/echo-socket`, ['registry.v1.json']);
  await new Promise<void>((resolve, reject) => {
    client.once('open', () => resolve());
    client.once('error', reject);
  });
  const reply = new Promise<string>((resolve) => client.once('message', (data: Buffer) => resolve(data.toString())));
  client.send(JSON.stringify({ type: 'say', text: 'hello' }));
  assert.equal(JSON.parse(await reply), { type: 'said', text: 'hello' });

  const metrics = await (await fetch(`${server.opsUrl}/metrics`)).text();
  assert.match(metrics, /registry_websockets_open\{endpoint="test-echo"\} 1/);

  const closed = new Promise<number>((resolve) => client.once('close', (code: number) => resolve(code)));
  await server.stop('shutdown under test');
  assert.is(await closed, 1001);
  const after = await waitFor(() => server.services.metrics.render().match(/registry_websockets_closed_total\{code="1001",endpoint="test-echo"\} 1/) ?? undefined, 'the close to be counted');
  assert.ok(after);
});

test.run();
