import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import type { PluginRelease } from '../../plugins/plugin-catalog.js';
import { pluginInstallations } from '../../plugins/plugins.feature.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertApiError } from '../support/identity.js';
import { installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A Plugin's settings are its Runtime code's through the platform permissions its release requests (media-plugin.md:
 * Media requests `settings:read` and `settings:write`): reading needs `settings:read`, writing and clearing
 * `settings:write`, refused as Plugin Grants refuse a release without `plugin-grant:request`.
 */
let server: TestServer;
let page: RuntimeClient;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  const pia = await runtimePerson(server, 'pia');
  const world = await testEnvironment(server.opsUrl, 'permission-world', 'pia');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  page = await (await pia.runtime(world)).open();
});

/**
 * Runs `work` while the installed Media release requests every platform permission but `withheld`. The release comes
 * from the server's own installations (the installation is still looked up); only its permissions differ, which the
 * catalog, holding the one Media release, cannot otherwise show.
 */
async function withheld(permission: string, work: () => Promise<void>): Promise<void> {
  const installations = pluginInstallations(server.services);
  const installed = installations.installed;
  installations.installed = async (...args: Parameters<typeof installed>): Promise<PluginRelease | undefined> => {
    const release = await installed.apply(installations, args);
    return release && { ...release, platformPermissions: release.platformPermissions.filter((p) => p !== permission) };
  };
  try {
    await work();
  } finally {
    installations.installed = installed;
  }
}

const read = (headers: Record<string, string> = {}, method = 'GET'): Promise<Response> => page.fenced(MEDIA, { method, headers });
const etagNow = async (): Promise<string> => (await read()).headers.get('etag')!;

test('without settings:read a read is 403 plugin_permission_not_requested, whatever its preconditions; writes still work', async () => {
  const before = await etagNow();
  await withheld('settings:read', async () => {
    await assertApiError(await read(), 403, 'plugin_permission_not_requested');
    await assertApiError(await read({ 'if-none-match': before }), 403, 'plugin_permission_not_requested');
    await assertApiError(await read({ 'if-match': '"stale"' }), 403, 'plugin_permission_not_requested');
    assert.is((await read({}, 'HEAD')).status, 403);
    const put = await page.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.5 } }, headers: { 'if-match': before } });
    assert.is(put.status, 200, await put.clone().text());
  });
  assert.is((await read()).status, 200);
});

test('without settings:write a write or clear is 403 before its If-Match is looked at, and stores nothing; reads still work', async () => {
  const before = await etagNow();
  await withheld('settings:write', async () => {
    const body = { layer: 'user', settings: { volume: 0.25 } };
    await assertApiError(await page.fenced(MEDIA, { method: 'PUT', body, headers: { 'if-match': before } }), 403, 'plugin_permission_not_requested');
    await assertApiError(await page.fenced(MEDIA, { method: 'PUT', body }), 403, 'plugin_permission_not_requested');
    await assertApiError(await page.fenced(`${MEDIA}?layer=user`, { method: 'DELETE', headers: { 'if-match': before } }), 403, 'plugin_permission_not_requested');
    const res = await read();
    assert.is(res.status, 200);
    assert.is(((await jsonOf(res)) as { etag: string }).etag, before);
  });
  assert.is(await etagNow(), before, 'nothing was written');
});

test('the API description names the permission each operation needs and the refusal', async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, { description: string }>> };
  const item = doc.paths['/v1/runtime/plugins/{pluginId}/settings']!;
  for (const [method, permission] of [['get', 'settings:read'], ['put', 'settings:write'], ['delete', 'settings:write']] as const) {
    assert.match(item[method]!.description, `\`${permission}\``, method);
    assert.match(item[method]!.description, '403 plugin_permission_not_requested', method);
  }
});

test.run();
