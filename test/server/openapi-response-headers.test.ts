import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { enrolFirst } from '../support/identity.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { proxyDatabase, type TcpProxy } from '../support/tcp-proxy.js';
import { waitFor } from '../support/wait.js';

/**
 * Headers the first tables' answers carry are the headers their OpenAPI responses declare: `/ready`'s 503 sends
 * Retry-After (its own PlatformStatusResponse answer as much as a Problem), logout's 200 clears the cookies. The
 * server runs on the real database through a proxy the test cuts, so `/ready` answers 503.
 */
let db: TestDatabase;
let proxy: TcpProxy;
let server: TestServer;
type Json = Record<string, unknown>;
let document: { paths: Record<string, Record<string, { responses: Record<string, { headers?: Json }> }>> };

test.before(async () => {
  db = await createTestDatabase();
  let viaProxy: string;
  ({ proxy, url: viaProxy } = await proxyDatabase(db.url));
  server = await startTestServer(viaProxy, productParts);
  document = (await jsonOf(await fetch(`${server.url}/v1/openapi.json`))) as typeof document;
});
test.after(async () => {
  await proxy.restore();
  await server.stop('test over');
  await proxy.close();
  await db.drop();
});

const declared = (path: string, method: string, status: number): string[] => Object.keys(document.paths[path]![method]!.responses[String(status)]!.headers ?? {});

test('logout: the Set-Cookie its 200 sends is declared', async () => {
  const { device } = await enrolFirst(server.url, 'vera');
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } })).status, 200);
  const out = await browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST' });
  assert.is(out.status, 200, await out.clone().text());
  assert.ok(out.headers.getSetCookie().length > 0);
  assert.ok(declared('/v1/auth/logout', 'post', 200).includes('Set-Cookie'), JSON.stringify(declared('/v1/auth/logout', 'post', 200)));
});

test('/ready unavailable: 503 with Retry-After, as its documented 503 says; every documented 503 declares it', async () => {
  await proxy.cut();
  const ready = await waitFor(async () => {
    const res = await fetch(`${server.url}/ready`);
    return res.status === 503 ? res : undefined;
  }, '/ready to answer 503');
  assert.ok(Number(ready.headers.get('retry-after')) > 0);
  assert.is(((await jsonOf(ready)) as { status: string }).status, 'unavailable');
  assert.ok(declared('/ready', 'get', 503).includes('Retry-After'), JSON.stringify(declared('/ready', 'get', 503)));
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const unavailable = operation.responses['503'];
      if (unavailable) assert.ok(Object.keys(unavailable.headers ?? {}).includes('Retry-After'), `${method} ${path}`);
    }
  }
});

test.run();
