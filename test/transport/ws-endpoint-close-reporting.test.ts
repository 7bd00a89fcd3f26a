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
import { waitFor } from '../support/wait.js';

/**
 * How the WebSocket framework reports the way a connection ended (close codes to onClose and the observer, and its
 * warnings), against a real uWS server on loopback with the `ws` package as the client.
 * (test/transport/ws-endpoint.test.ts holds its 20-test limit; these are its neighbours.)
 */
const JSON_PROTOCOL = 'registry.v1.json';

const closes: Array<{ code: number; reason: string }> = [];
const observed: Array<{ name: string; code: number }> = [];
const logs: Array<{ level: number; msg: string; connectionId?: string }> = [];
const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });

let app: TemplatedApp;
let port = 0;
const mounted: MountedWebSocketEndpoint[] = [];
const clients: WebSocket[] = [];

test.before(async () => {
  app = uws.App();
  const echo = defineWebSocketEndpoint<{ name: string }, { type: 'echo'; text: string }, { type: 'echo'; text: string }>({
    path: '/echo',
    name: 'echo',
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: 8,
    inbound: z.object({ type: z.literal('echo'), text: z.string() }),
    async authenticate() {
      await new Promise((resolve) => setTimeout(resolve, 5)); // an asynchronous upgrade, as every real endpoint's
      return { name: 'alice' };
    },
    onMessage: (conn, message) => void conn.send(message),
    onClose: (_conn, code, reason) => void closes.push({ code, reason }),
  });
  mounted.push(
    mountWebSocketEndpoint(app, echo, {
      logger,
      newRequestId: () => `req_${randomUUID()}`,
      observer: { opened: () => undefined, closed: (name, code) => void observed.push({ name, code }) },
    }),
  );
  port = await listenOnLoopback(app);
});

test.after(() => {
  for (const client of clients) client.terminate();
  for (const endpoint of mounted) endpoint.shutdown();
  closeApp(app);
});

const open = (): Promise<{ ws: WebSocket; closed: Promise<number> }> =>
  openUncut(() => new WebSocket(`ws://127.0.0.1:${port}/echo`, [JSON_PROTOCOL]), (ws) => void clients.push(ws));

test('a text frame that is not UTF-8 is reported as 1007 (undecodable), not as an abnormal closure', async () => {
  const before = closes.length;
  const { ws, closed } = await open();
  ws.send(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { binary: false }); // {"\xff\xfe"}: not UTF-8
  const clientSaw = await closed;
  const serverSaw = await waitFor(() => closes[before], 'onClose');
  const observerSaw = observed.at(-1);
  // endpoint.ts and both AsyncAPI documents: "1007 bytes the codec cannot decode". uWS cuts such a connection itself
  // (the client sees 1006, as with uWS's own payload limit), so onClose and the observer must say 1007, as they say
  // 1009 for uWS's cut over maxPayloadLength.
  assert.is(serverSaw.code, CloseCode.undecodable, `onClose got ${JSON.stringify(serverSaw)}; the client saw ${clientSaw}; the observer ${JSON.stringify(observerSaw)}`);
  assert.equal(observerSaw, { name: 'echo', code: CloseCode.undecodable });
});

test('a client that vanishes long after its upgrade is not logged as uWS cutting the socket right after the upgrade', async () => {
  const { ws, closed } = await open();
  ws.send(JSON.stringify({ type: 'echo', text: 'hello' }));
  await new Promise<void>((resolve) => ws.once('message', () => resolve()));
  const from = logs.length;
  ws.terminate(); // a lost network: no close frame, the server sees 1006
  await closed;
  await waitFor(() => logs.slice(from).some((l) => l.msg === 'connection closed'), 'the server to see the close');
  const warnings = logs.slice(from).filter((l) => l.level >= 40).map((l) => l.msg);
  // The `upgrading` flag is set on the object given to res.upgrade(); uWS copies its properties into the socket's
  // user data, so clearing it afterwards on the original never reaches what the close handler reads.
  assert.equal(warnings, [], 'an ordinary 1006 long after the upgrade is blamed on uNetworking/uWebSockets#1928');
});

test.run();
