import { createServer, connect, type Server, type Socket } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runRegistryAdmin } from '../support/process.js';
import { startTestServer, type TestServer } from '../support/server.js';

/**
 * The operators' command line says what the operator listener said: its stable code and message, whichever of the
 * spec's two error bodies carries them. Runtime, account-policy, fencing and coordination failures (a storage outage,
 * a draining node) are flat Problems (`code`, `detail`), the others nested ApiErrors (`error.code`, `error.message`).
 *
 * Postgres is reached through a TCP relay the test can cut: a real outage, as the server sees one.
 */
let db: TestDatabase;
let server: TestServer;
let relay: Server;
let relayPort = 0;
const relayed = new Set<Socket>();
let upstream: { host: string; port: number };

function listenRelay(port: number): Promise<void> {
  relay = createServer((client) => {
    const backend = connect(upstream.port, upstream.host);
    relayed.add(client).add(backend);
    const drop = (): void => {
      client.destroy();
      backend.destroy();
      relayed.delete(client);
      relayed.delete(backend);
    };
    client.on('error', drop).on('close', drop);
    backend.on('error', drop).on('close', drop);
    client.pipe(backend).pipe(client);
  });
  return new Promise((resolve) => relay.listen(port, '127.0.0.1', () => resolve()));
}

function cutRelay(): Promise<void> {
  for (const socket of relayed) socket.destroy();
  relayed.clear();
  return new Promise((resolve) => relay.close(() => resolve()));
}

test.before(async () => {
  db = await createTestDatabase();
  const url = new URL(db.url);
  upstream = { host: url.hostname, port: Number(url.port) };
  await listenRelay(0);
  relayPort = (relay.address() as { port: number }).port;
  url.hostname = '127.0.0.1';
  url.port = String(relayPort);
  server = await startTestServer(url.toString(), productParts);
});
test.after(async () => {
  if (!relay.listening) await listenRelay(relayPort);
  await server.stop('test over');
  await cutRelay();
  await db.drop();
});

test('control: an ApiError refusal is printed with its code and message', async () => {
  const out = await runRegistryAdmin(server.opsUrl, 'test-operator', ['devices', 'list', '--handle', 'nobody-here']);
  assert.is(out.code, 1);
  assert.match(out.stderr, /account_not_found: no enrolled account @nobody-here/);
});

test('a Problem refusal (storage outage, 503) is printed with its code and detail, not "503: request failed"', async () => {
  const before = await runRegistryAdmin(server.opsUrl, 'test-operator', ['environment', 'list']);
  assert.is(before.code, 0, before.stderr);
  await cutRelay();
  try {
    const out = await runRegistryAdmin(server.opsUrl, 'test-operator', ['environment', 'list']);
    assert.is(out.code, 1);
    assert.match(out.stderr, /storage_unavailable: the registry cannot reach its storage right now/, out.stderr);
  } finally {
    await listenRelay(relayPort);
  }
});

test('an operator listener it cannot reach, or that answers something other than JSON: said so, with the address and why', async () => {
  // A port nobody listens on: taken, then given back.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
  const port = (closed.address() as { port: number }).port;
  await new Promise((resolve) => closed.close(resolve));
  const refused = await runRegistryAdmin(`http://127.0.0.1:${port}`, 'test-operator', ['environment', 'list']);
  assert.is(refused.code, 1);
  assert.match(refused.stderr, new RegExp(`http://127\\.0\\.0\\.1:${port}`), refused.stderr);
  assert.match(refused.stderr, /ECONNREFUSED/, refused.stderr);

  // Something else on that port (a proxy's HTML error page, say).
  const html = createServer((socket) => {
    socket.on('data', () => socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: 21\r\nconnection: close\r\n\r\n<html>upstream</html>'));
  });
  await new Promise<void>((resolve) => html.listen(0, '127.0.0.1', () => resolve()));
  try {
    const other = await runRegistryAdmin(`http://127.0.0.1:${(html.address() as { port: number }).port}`, 'test-operator', ['environment', 'list']);
    assert.is(other.code, 1);
    assert.match(other.stderr, /502/, other.stderr);
    assert.match(other.stderr, /text\/html/, other.stderr);
    assert.not.match(other.stderr, /Unexpected token|is not valid JSON/, other.stderr);
  } finally {
    await new Promise((resolve) => html.close(resolve));
  }
});

test.run();
