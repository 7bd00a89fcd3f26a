import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { declareBackend, installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** Through HTTP: a settings value off its grid is refused; Environment Backend Grants follow their Environment's declaration. */
let db: TestDatabase;
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
let page: RuntimeClient;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';
const ENDPOINT = 'https://api.settings-world.example/registry-grants';
const MOVED = 'https://api2.settings-world.example/registry-grants';

withTestServer(test, (started) => ({ db, server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'settings-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  page = await (await pete.runtime(world)).open();
});

const declare = (body: unknown) => declareBackend(server.opsUrl, world.environmentId, body);
const introspect = async (grant: string, endpoint: string) =>
  jsonOf(await fetch(`${server.url}/v1/runtime/environment-backend/grants/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant, endpoint }) }));

test('PUT volume off the 0.05 grid is refused and never persisted or delivered', async () => {
  const read = await page.fenced(MEDIA);
  const etag = read.headers.get('etag')!;
  const res = await page.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.99999999999 } }, headers: { 'if-match': etag } });
  const body = await jsonOf(res.clone());
  const rows = await db.connection.db.selectFrom('plugin_settings').select(['setting', 'value']).execute();
  assert.is(res.status, 422, `answered ${res.status}; stored ${JSON.stringify(rows)}; resolved ${JSON.stringify(body.resolved)}`);
});

test('a grant keeps neither a scope nor an endpoint its Environment no longer declares', async () => {
  assert.is((await declare({ endpoint: ENDPOINT, scopes: ['orders:read', 'orders:write'] })).status, 200);
  const issue = async (scopes: string[]): Promise<string> => {
    const res = await page.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body: { scopes } });
    assert.is(res.status, 201, await res.clone().text());
    return ((await res.json()) as { grant: string }).grant;
  };
  const grant = await issue(['orders:write']);
  const reader = await issue(['orders:read']);
  assert.is((await introspect(grant, ENDPOINT)).active, true);

  // Declaring again what the grants hold (and more) keeps them.
  assert.is((await declare({ endpoint: ENDPOINT, scopes: ['orders:read', 'orders:write', 'orders:refund'] })).status, 200);
  assert.is((await introspect(grant, ENDPOINT)).active, true);
  // Withdrawing a scope ends the grants holding it, and only those.
  assert.is((await declare({ endpoint: ENDPOINT, scopes: ['orders:read'] })).status, 200);
  assert.equal(await introspect(grant, ENDPOINT), { active: false });
  assert.is((await introspect(reader, ENDPOINT)).active, true);
  assert.is((await declare({ endpoint: ENDPOINT, scopes: ['orders:read', 'orders:write'] })).status, 200);
  const again = await issue(['orders:write']);

  // The Environment withdraws orders:write and moves its backend.
  assert.is((await declare({ endpoint: MOVED, scopes: ['orders:read'] })).status, 200);
  const refused = await page.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body: { scopes: ['orders:write'] } });
  assert.is(refused.status, 422, 'a new grant for orders:write is refused');
  assert.equal(await introspect(again, ENDPOINT), { active: false }, 'a grant for the retired endpoint ends');
  assert.equal(await introspect(reader, ENDPOINT), { active: false }, 'a moved endpoint ends every grant for the old one');
});

test('the versioned scope the spec names for a Backend Grant (notifications.publish@1.0.0) can be declared, issued and introspected', async () => {
  const versioned = 'notifications.publish@1.0.0';
  const declared = await declare({ endpoint: ENDPOINT, scopes: ['orders:read', versioned] });
  assert.is(declared.status, 200, await declared.clone().text());
  const res = await page.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body: { scopes: [versioned] } });
  assert.is(res.status, 201, await res.clone().text());
  const { grant } = (await res.json()) as { grant: string };
  const seen = await introspect(grant, ENDPOINT);
  assert.equal([seen.active, seen.scopes], [true, [versioned]]);
  // Still a closed pattern: a version is digits, and nothing may follow it.
  for (const scopes of [['notifications.publish@'], ['notifications.publish@x'], ['notifications.publish@1.0.0.0'], ['notifications.publish@1@2']]) {
    assert.is((await declare({ endpoint: ENDPOINT, scopes })).status, 400, scopes[0]);
  }
});

test('an endpoint with a fragment is refused even when the fragment is empty (a bare "#")', async () => {
  // WHATWG URL reports an empty fragment as hash '' yet keeps the '#' in href: the declaration must still refuse it.
  for (const endpoint of [`${ENDPOINT}#`, `${ENDPOINT}#part`, `${ENDPOINT}?q=1#`]) {
    const res = await declare({ endpoint, scopes: ['orders:read'] });
    assert.is(res.status, 400, `${endpoint} answered ${res.status}`);
  }
});

test.run();
