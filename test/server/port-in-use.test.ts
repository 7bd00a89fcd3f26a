import { createServer, type AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { spawnServer } from '../support/process.js';
import { startTestServer, type TestServer } from '../support/server.js';

/**
 * A port another server already listens on refuses the start with a clear error. uWebSockets.js listens with
 * SO_REUSEPORT unless told otherwise, and Linux then lets a second process bind the same address and port: a second
 * server (another version mid-deploy, a developer's second checkout on its own database) started "fine", and the kernel
 * shared the connections between the two.
 */
let first: TestServer;
let firstDb: TestDatabase;
let otherDb: TestDatabase;

test.before(async () => {
  firstDb = await createTestDatabase();
  otherDb = await createTestDatabase();
  // Ports named explicitly, as in production: Linux never lets a second socket join a port it chose itself (port 0).
  first = await startTestServer(firstDb.url, {}, { PORT: String(await freePort()), OPS_PORT: String(await freePort()) });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
test.after(async () => {
  await first.stop('test over');
  await firstDb.drop();
  await otherDb.drop();
});

async function startRefusal(env: Record<string, string>): Promise<string> {
  let second: TestServer | undefined;
  try {
    second = await startTestServer(otherDb.url, {}, env);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  await second.stop('test');
  return `started on ${second.url} (operator ${second.opsUrl}) beside the first server`;
}

test('the public port of a running server refuses a second server', async () => {
  const message = await startRefusal({ PORT: String(first.port) });
  assert.match(message, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${first.port} \\(in use`));
});

test('the operator port of a running server refuses a second server', async () => {
  const message = await startRefusal({ OPS_PORT: String(first.opsPort) });
  assert.match(message, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${first.opsPort} \\(in use`));
});

test('the same port on the wildcard address is in use too', async () => {
  const message = await startRefusal({ HOST: '0.0.0.0', PORT: String(first.port) });
  assert.match(message, new RegExp(`cannot listen on 0\\.0\\.0\\.0:${first.port} \\(in use`));
});

test('the server process says so and exits 1', async () => {
  let outcome: string;
  try {
    const second = await spawnServer('dist/server/main.js', { DATABASE_URL: otherDb.url, PORT: String(first.port) });
    second.child.kill('SIGTERM');
    await second.exited;
    outcome = `listened on ${second.url}`;
  } catch (error) {
    outcome = error instanceof Error ? error.message : String(error);
  }
  assert.match(outcome, /^server exited \(1\) before listening/);
  assert.match(outcome, `cannot listen on 127.0.0.1:${first.port} (in use or not permitted)`);
  // The first server still answers on its port.
  assert.is((await fetch(`${first.url}/ready`)).status, 200);
});

test.run();
