import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { ENDED_GRANT_RETENTION_MS, sweepEndedRuntimeGrants } from '../../runtime/grant-sweep.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { declareBackend, installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Runtime grants are removed a day after they expired, revoked or not (the runtime feature sweeps every ten minutes;
 * the test runs the same sweep at the server's clock). Live grants, and grants revoked or expired less than a day ago,
 * are untouched (introspected and revoked through HTTP).
 */
const clock = new ManualClock(Date.now());
let db: TestDatabase;
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
const ENDPOINT = 'https://api.retention-world.example/registry-grants';
const MEDIA_GRANTS = '/v1/runtime/plugins/plg_media/grants';
const BACKEND_GRANTS = '/v1/runtime/environment-backend/grants';

withTestServer(test, (started) => ({ db, server } = started), productParts, LONG_LEASE_ENV, clock);
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  pete.device.now = () => clock.now();
  world = await testEnvironment(server.opsUrl, 'retention-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  const declared = await declareBackend(server.opsUrl, world.environmentId, { endpoint: ENDPOINT, scopes: ['orders:read'] });
  assert.is(declared.status, 200);
});

async function grants(page: RuntimeClient): Promise<{ plugin: { grantId: string; grant: string }; backend: { grantId: string; grant: string } }> {
  const plugin = await page.pluginGrant('plg_media', { component: 'control', scopes: ['media:connect'], context: { scope: 'lobby' } });
  const backend = await page.fenced(BACKEND_GRANTS, { method: 'POST', body: { scopes: ['orders:read'] } });
  assert.is(plugin.status, 201, await plugin.clone().text());
  assert.is(backend.status, 201, await backend.clone().text());
  return { plugin: (await jsonOf(plugin)) as never, backend: (await jsonOf(backend)) as never };
}
const introspectPlugin = async (grant: string) =>
  jsonOf(await fetch(`${server.url}${MEDIA_GRANTS}/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant }) }));
const introspectBackend = async (grant: string) =>
  jsonOf(await fetch(`${server.url}${BACKEND_GRANTS}/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant, endpoint: ENDPOINT }) }));

test('a day after a grant expired the sweep forgets it; live grants and grants ended less than a day ago stay', async () => {
  const early = await (await pete.runtime(world)).open();
  const old = await grants(early);
  // The backend grant is revoked, the plugin grant left to expire (five minutes).
  assert.is((await fetch(`${server.url}${BACKEND_GRANTS}/${old.backend.grantId}`, { method: 'DELETE', headers: early.headers() })).status, 204);

  clock.advance(ENDED_GRANT_RETENTION_MS + 10 * 60_000);
  // A day on, the registry page session has ended too: the person opens a new one, as a browser would.
  assert.is((await pete.browser.openPageSession()).status, 204);
  const page = await (await pete.runtime(world)).open();
  const live = await grants(page);
  const recent = await grants(page);
  assert.is((await fetch(`${server.url}${MEDIA_GRANTS}/${recent.plugin.grantId}`, { method: 'DELETE', headers: page.headers() })).status, 204);

  assert.equal(await sweepEndedRuntimeGrants(db.connection.db, clock.now()), { removed: 2, done: true });

  // Their session's sign-in has long expired, so no page can ask about them any more: the rows are gone.
  const q = db.connection.db;
  assert.equal(await q.selectFrom('plugin_grants').select('id').where('id', '=', old.plugin.grantId).execute(), []);
  assert.equal(await q.selectFrom('environment_backend_grants').select('id').where('id', '=', old.backend.grantId).execute(), []);

  assert.is((await introspectPlugin(live.plugin.grant)).active, true);
  assert.is((await introspectBackend(live.backend.grant)).active, true);
  assert.equal(await introspectPlugin(recent.plugin.grant), { active: false });
  assert.is((await fetch(`${server.url}${MEDIA_GRANTS}/${recent.plugin.grantId}`, { method: 'DELETE', headers: page.headers() })).status, 204, 'ended an hour ago: still known');
});

test.run();
