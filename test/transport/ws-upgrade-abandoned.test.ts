import { randomBytes, randomUUID } from 'node:crypto';
import { connect as tcpConnect } from 'node:net';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { defineWebSocketEndpoint, mountWebSocketEndpoint, type MountedWebSocketEndpoint, type WebSocketEndpointDefinition } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { openUncut } from '../support/uws-upgrade-cut.js';
import { waitFor } from '../support/wait.js';

/**
 * What `authenticate` takes for a connection (a place under a limit) comes back exactly once: through `onClose` once
 * the socket opened, through `onAbandoned` when it never does. A real uWS server on loopback; each upgrade's
 * `authenticate` waits until the test lets it return, so the test decides what happens meanwhile.
 */
interface User {
  readonly name: string;
}

/** Per user name: `authenticate` has been called, and the function that lets it return. */
const asked = new Map<string, () => void>();
/** Names whose upgrades `authenticate` lets through at once (a client opening again after a cut, say). */
const free = new Set<string>();
/** What the endpoints reported, in order, as `<hook> <name>`. */
const reported: string[] = [];

let app: TemplatedApp;
let port = 0;
const mounted = new Map<string, MountedWebSocketEndpoint>();
const clients: WebSocket[] = [];

function endpoint(name: string, overrides: Partial<WebSocketEndpointDefinition<User, never, never>> = {}): WebSocketEndpointDefinition<User, never, never> {
  return {
    name,
    path: `/${name}`,
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: 8,
    inbound: null,
    async authenticate(upgrade) {
      const user = { name: upgrade.headers['x-user'] ?? '' };
      if (!free.has(user.name)) await new Promise<void>((resolve) => asked.set(user.name, resolve));
      return user;
    },
    onAbandoned: (user) => void reported.push(`abandoned ${user.name}`),
    onOpen: (conn) => void reported.push(`open ${conn.user.name}`),
    onClose: (conn) => void reported.push(`close ${conn.user.name}`),
    ...overrides,
  };
}

test.before(async () => {
  app = uws.App();
  const deps = { logger: pino({ level: 'silent' }), newRequestId: () => `req_${randomUUID()}` };
  for (const definition of [
    endpoint('held'),
    endpoint('stopping'),
    endpoint('failing-open', {
      onOpen: (conn) => {
        reported.push(`open ${conn.user.name}`);
        throw new Error('bug in onOpen');
      },
    }),
    endpoint('failing-upgrade', {
      messagesPerMinute: 60,
      messageBudget: () => {
        throw new Error('bug after authenticate');
      },
    }),
  ]) {
    mounted.set(definition.name, mountWebSocketEndpoint(app, defineWebSocketEndpoint(definition), deps));
  }
  port = await listenOnLoopback(app);
});

test.after(() => {
  for (const client of clients) client.terminate();
  for (const endpoint of mounted.values()) endpoint.shutdown();
  closeApp(app);
});

const reportsOf = (name: string): string[] => reported.filter((line) => line.endsWith(` ${name}`));
/** Lets `name`'s upgrade, and any later one, through `authenticate`. */
function release(name: string): void {
  free.add(name);
  const letThrough = asked.get(name);
  if (!letThrough) throw new Error(`${name} was not asked for`);
  letThrough();
}

/** A client upgrading as `name`, admitted or not; resolves with its close code or refusal status, once it has one. */
function upgradeAs(path: string, name: string): { ws: WebSocket; outcome: Promise<{ status?: number; closed?: number }> } {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { 'x-user': name } });
  clients.push(ws);
  ws.on('error', () => undefined);
  const outcome = new Promise<{ status?: number; closed?: number }>((resolve) => {
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    ws.on('close', (code: number) => resolve({ closed: code }));
  });
  return { ws, outcome };
}

test('a client gone before authenticate returned: onAbandoned once, and no socket', async () => {
  const socket = tcpConnect(port, '127.0.0.1', () => {
    socket.write(
      [
        'GET /held HTTP/1.1',
        `Host: 127.0.0.1:${port}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        'Sec-WebSocket-Version: 13',
        'X-User: gone',
        '',
        '',
      ].join('\r\n'),
    );
  });
  socket.on('error', () => undefined);
  await waitFor(() => asked.has('gone'), 'authenticate to be called');
  socket.destroy();
  await new Promise((resolve) => socket.once('close', resolve));
  // The server reads the client's FIN on its next poll, before a timer this long comes due.
  await new Promise((resolve) => setTimeout(resolve, 50));
  release('gone');
  await waitFor(() => reportsOf('gone').length > 0, 'a report');
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(reportsOf('gone'), ['abandoned gone']);
});

test('the server began shutting down meanwhile: refused 503, onAbandoned once', async () => {
  const { outcome } = upgradeAs('/stopping', 'late');
  await waitFor(() => asked.has('late'), 'authenticate to be called');
  mounted.get('stopping')!.shutdown();
  release('late');
  assert.equal(await outcome, { status: 503 });
  assert.equal(reportsOf('late'), ['abandoned late']);
});

test('the upgrade failed after authenticate: onAbandoned once', async () => {
  const { ws } = upgradeAs('/failing-upgrade', 'unlucky');
  await waitFor(() => asked.has('unlucky'), 'authenticate to be called');
  release('unlucky');
  await waitFor(() => reportsOf('unlucky').length > 0, 'a report');
  assert.equal(reportsOf('unlucky'), ['abandoned unlucky']);
  ws.terminate();
});

test('a socket that opened gives back through onClose alone, however it closes', async () => {
  const opening = openUncut(() => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/held`, { headers: { 'x-user': 'guest' } });
    clients.push(ws);
    return ws;
  });
  await waitFor(() => asked.has('guest'), 'authenticate to be called');
  release('guest');
  const { ws, closed } = await opening;
  ws.close();
  await closed;
  await waitFor(() => reportsOf('guest').includes('close guest'), 'the server to see the close');

  const failing = upgradeAs('/failing-open', 'broken');
  await waitFor(() => asked.has('broken'), 'authenticate to be called');
  release('broken');
  assert.ok((await failing.outcome).closed !== undefined, 'the socket opened and closed');
  await waitFor(() => reportsOf('broken').includes('close broken'), 'the server to see the close');

  // A socket uWS cut right after its upgrade (see cutAfterUpgrade) opened all the same: it too reports open, then close.
  for (const name of ['guest', 'broken']) {
    const lines = reportsOf(name);
    assert.ok(lines.length >= 2 && lines.length % 2 === 0, `${name}: ${lines.join(', ')}`);
    assert.ok(!lines.some((line) => line.startsWith('abandoned')), `${name}: ${lines.join(', ')}`);
  }
});

test.run();
