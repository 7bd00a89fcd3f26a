import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { clientTextFrame, RawWebSocket } from '../support/raw-websocket.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { controlToken, runtimeSocket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * The server speaks first on both Runtime sockets: `ready` (runtime socket) and `session.activity` `connected`
 * (control channel) are the first messages after the 101, whatever the client sent. A client sends only once it has
 * the 101 (RFC 6455 4.1); frames written before it, behind the handshake, are dropped unread (the AsyncAPI document
 * says so): never answered, never counted, and the socket serves what comes after the 101 as usual.
 */
let server: TestServer;
let env: TestEnvironment;
let ola: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  ola = await runtimePerson(server, 'ola-ef');
  env = await testEnvironment(server.opsUrl, 'early-frames', 'ola-ef');
});

const pathOf = (url: string): string => {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
};

test('runtime socket: a ping sent behind the handshake is dropped; ready comes first, and the socket then serves', async () => {
  const page = await (await ola.runtime(env)).open();
  const raw = RawWebSocket.open(server.port, pathOf(page.socketUrl()), RuntimeClient.subprotocols(page.accessToken), { Origin: env.origin }, [
    clientTextFrame(JSON.stringify({ type: 'ping', ref: 'early' })),
  ]);
  await waitFor(() => raw.messages.length > 0, 'the first message');
  assert.match(raw.statusLine ?? '', / 101 /);
  assert.is(raw.messages[0]!.type, 'ready');
  raw.send(JSON.stringify({ type: 'ping', ref: 'after' }));
  await waitFor(() => raw.messages.find((m) => m.type === 'pong'), 'the pong');
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(raw.messages.filter((m) => m.type === 'pong'), [{ type: 'pong', ref: 'after' }], 'the early ping is never answered');
  assert.is(raw.closeCode, undefined);
  raw.close();
  // The session's socket place is free again for the page's own socket.
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  socket.ws.close();
  await page.release();
});

test('control channel: a message behind the handshake is dropped, not read (no 1008); connected comes first', async () => {
  const page = await ola.runtime(env);
  assert.is((await page.createSession()).status, 201);
  const raw = RawWebSocket.open(server.port, '/v1/runtime/control', RuntimeClient.subprotocols(await controlToken(page)), { Origin: env.origin }, [
    clientTextFrame(JSON.stringify({ type: 'presence.update', state: 'away' })),
  ]);
  await waitFor(() => raw.messages.length > 0, 'the first message');
  assert.equal([raw.messages[0]!.type, raw.messages[0]!.reason], ['session.activity', 'connected']);
  await new Promise((r) => setTimeout(r, 200));
  assert.is(raw.closeCode, undefined, 'the dropped frame was never read');
  // What comes after the 101 is read, and closes the read-only channel as any client message does.
  raw.send(JSON.stringify({ type: 'presence.update', state: 'away' }));
  await waitFor(() => raw.closeCode, 'the close');
  assert.is(raw.closeCode, 1008);
  raw.close();
  await page.release();
});

test.run();
