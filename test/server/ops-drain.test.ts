import { connect, type Socket } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { spawnServer } from '../support/process.js';
import { runtimePerson } from '../support/runtime.js';
import { DeviceClient } from '../../client/device-client.js';

/**
 * SIGTERM drains: "stop accepting, finish in-flight work, flush commits". The public listener does; the operator
 * listener (registry-admin's commands) is neither drained nor waited for: its requests in flight are cut.
 */
let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Opens a raw HTTP/1.1 request whose body is sent only in part; `finish` sends the rest, `answer` is what came back. */
function partialRequest(port: number, method: string, path: string, headers: Record<string, string>, body: string, sent: number) {
  const socket: Socket = connect(port, '127.0.0.1');
  let received = '';
  const closed = new Promise<string>((resolve) => {
    socket.on('data', (d) => (received += d.toString()));
    socket.on('error', () => resolve(received));
    socket.on('close', () => resolve(received));
  });
  const head = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)].join('\r\n');
  const opened = new Promise<void>((resolve) => socket.on('connect', () => resolve()));
  return {
    async start() {
      await opened;
      socket.write(`${head}\r\n\r\n${body.slice(0, sent)}`);
    },
    finish() {
      if (!socket.destroyed) socket.write(body.slice(sent));
    },
    answer: closed,
  };
}

test('control: a public request in flight at SIGTERM is finished (201) before the process exits', async () => {
  const server = await spawnServer('dist/server/main.js', { DATABASE_URL: db.url });
  const publicPort = Number(new URL(server.url).port);
  const device = await DeviceClient.generate('drain laptop');
  const body = JSON.stringify({ handle: 'drain-public', device: { name: device.name, publicKey: device.publicJwk } });
  const req = partialRequest(publicPort, 'POST', '/v1/enrol/start', { 'content-type': 'application/json' }, body, 10);
  await req.start();
  await sleep(200);
  server.child.kill('SIGTERM');
  await sleep(500);
  req.finish();
  const answer = await req.answer;
  assert.equal(await server.exited, { code: 0, signal: null });
  assert.match(answer, /^HTTP\/1\.1 201/, JSON.stringify(answer.slice(0, 300)));
});

test('an operator request in flight at SIGTERM is finished, not cut (registry-admin environment register)', async () => {
  const server = await spawnServer('dist/server/main.js', { DATABASE_URL: db.url });
  const opsPort = Number(new URL(server.opsUrl).port);
  await runtimePerson(server, 'owner-drain');
  const envBody = JSON.stringify({ environmentId: 'drain-env', origin: 'https://drain-env.example', ownerHandle: 'owner-drain', redirectUris: ['https://drain-env.example/cb'] });
  const ops = partialRequest(opsPort, 'POST', '/registry/environments', { 'content-type': 'application/json', 'x-operator-name': 'test-operator' }, envBody, 10);
  await ops.start();
  await sleep(200);
  server.child.kill('SIGTERM');
  await sleep(500);
  ops.finish();
  const answer = await ops.answer;
  const exit = await server.exited;
  assert.equal(exit, { code: 0, signal: null });
  assert.match(answer, /^HTTP\/1\.1 201/, `the operator request in flight at SIGTERM got: ${JSON.stringify(answer.slice(0, 300))}`);
});

test.run();
