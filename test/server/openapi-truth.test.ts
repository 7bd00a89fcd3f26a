import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { newOpaqueToken } from '../../identity/opaque-tokens.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/** Statements of the served OpenAPI document, checked against the running server. */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let env: TestEnvironment;
let erin: RuntimePerson;
let openapi: { servers: Array<{ url: string }>; paths: Record<string, Record<string, { description?: string }>> };
const EVICTIONS_PER_MINUTE = 2;

test.before(async () => {
  db = await createTestDatabase();
  // PORT=0 ("any free port") as the README's table allows; the harness listens on 127.0.0.1.
  server = await startTestServer(db.url, productParts, { RUNTIME_EVICTIONS_PER_MINUTE: String(EVICTIONS_PER_MINUTE) });
  erin = await runtimePerson(server, 'erin');
  env = await testEnvironment(server.opsUrl, 'erins-world', 'erin');
  openapi = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as typeof openapi;
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('servers[0].url is where the API is served (PORT=0: the OpenAPI document says port 0; the issuer has the real port)', async () => {
  const discovery = (await (await fetch(`${server.url}/.well-known/openid-configuration`)).json()) as { issuer: string };
  assert.is(discovery.issuer, server.url);
  assert.is(openapi.servers[0]!.url, server.url);
});

test('activateRuntimeSession, as documented: only activations that certainly evict nobody are never limited; the holder re-activating several times at once over the quota can get 429', async () => {
  const described = openapi.paths['/v1/runtime/session/activate']!.post!.description!;
  assert.match(described, /certainly evict nobody \(the lease free or held by that session, and no other activation of the person under way\)/);
  const a = await erin.runtime(env);
  await a.createSession();
  const b = await erin.runtime(env);
  await b.createSession();
  assert.is((await a.activate()).status, 200);
  // Spend the quota: a and b evict each other until refused.
  let refused = false;
  for (let i = 0; i < EVICTIONS_PER_MINUTE + 2 && !refused; i++) {
    const res = await (i % 2 === 0 ? b : a).activate();
    if (res.status === 429) refused = true;
  }
  assert.ok(refused, 'quota spent');
  const holder = (await a.read()).status === 200 ? a : b;
  // The holder asks for its own lease back twice at once: neither activation can evict anybody.
  const statuses = (await Promise.all(Array.from({ length: 6 }, () => holder.activate()))).map((r) => r.status);
  // Each of them, while the others are under way, might evict (it reserves a token), so over the quota some are refused.
  assert.ok(statuses.includes(200) && statuses.every((s) => s === 200 || s === 429), statuses.join(' '));
  // One alone, with nothing else under way, is never limited.
  assert.is((await holder.activate()).status, 200);
});

test('introspectEnvironmentBackendGrant: "Grants are 256-bit random", as the grant presented (issued by newOpaqueToken) is', () => {
  assert.match(openapi.paths['/v1/runtime/environment-backend/grants/introspect']!.post!.description!, /256-bit random/);
  const { token } = newOpaqueToken('ebg');
  const bits = Buffer.from(token.slice('ebg_'.length), 'base64url').length * 8;
  assert.is(bits, 256, `the grant is ${bits}-bit random`);
});

test.run();
