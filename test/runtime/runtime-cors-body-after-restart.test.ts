import { createServer, type AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { declareBackend, LONG_LEASE_ENV, runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * A cross-origin operation with a body whose Origin this node has not looked up yet (after a restart, the first call
 * of every Environment; or a stranger's origin). The gateway looks the origin up (a query) before anything else, and
 * uWS hands body bytes that arrive before `onData` is set to nobody: the body is read from the start, so the request
 * is answered, never left waiting for a body that already came.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let world: TestEnvironment;
let page: RuntimeClient;
const ENDPOINT = 'https://api.restart-world.example/registry-grants';
// The same port across the restart, as a deployment has: the page's token names the listening URL as its issuer.
let ENV: Record<string, string>;
const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });

test.before(async () => {
  db = await createTestDatabase();
  ENV = { ...LONG_LEASE_ENV, PORT: String(await freePort()) };
  server = await startTestServer(db.url, productParts, ENV);
  const pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'restart-world', 'pete');
  page = await (await pete.runtime(world)).open();
  const declared = await declareBackend(server.opsUrl, world.environmentId, { endpoint: ENDPOINT, scopes: ['orders:read'] });
  assert.is(declared.status, 200);
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

const answerWithin = async (label: string, request: () => Promise<Response>, ms = 5_000): Promise<Response> => {
  const timer = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${label}: no answer within ${ms} ms`)), ms).unref());
  return Promise.race([request(), timer]);
};

test('a page whose first call after a restart is a backend grant request (with a body) is answered', async () => {
  await server.stop('deploy');
  server = await startTestServer(db.url, productParts, ENV);
  // The page keeps its token, session and lease (all stored); the browser keeps its preflight (max-age 600 s).
  const after = new RuntimeClient(server.url, page.accessToken, page.origin);
  after.sessionId = page.sessionId;
  after.lease = page.lease;
  const grant = () => after.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body: { scopes: ['orders:read'] } });
  const first = await answerWithin('first grant request after the restart', grant);
  assert.is(first.status, 201, await first.clone().text());
  // Control: once the origin is cached, the same request is answered.
  assert.is((await answerWithin('second grant request', grant)).status, 201);
});

test('a request with a body from an origin nobody registered is answered (refused), not left hanging', async () => {
  const res = await answerWithin('stranger', () =>
    fetch(`${server.url}/v1/runtime/environment-backend/grants`, {
      method: 'POST',
      headers: { origin: 'https://stranger.example', 'content-type': 'application/json', authorization: 'Bearer not-a-token' },
      body: JSON.stringify({ scopes: ['orders:read'] }),
    }),
  );
  assert.is(res.status, 401, await res.clone().text());
});

test.run();
