import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertApiError } from '../support/identity.js';
import { installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The settings read carries an `ETag`, so its preconditions are evaluated as RFC 9110 13.2.2 requires of an origin
 * server: `If-Match` naming no current tag (strong comparison) is 412, then `If-None-Match` naming the current tag
 * (weak comparison) is 304. Ignoring them answered 200 with whatever the settings had become.
 */
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  const pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'conditional-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  page = await (await pete.runtime(world)).open();
});

const get = (headers: Record<string, string> = {}, method = 'GET'): Promise<Response> => page.fenced(MEDIA, { method, headers });

let writes = 0;
/** Writes another volume and answers the tags before and after. */
async function moved(): Promise<{ before: string; after: string }> {
  const before = (await get()).headers.get('etag')!;
  const volume = 0.05 * ++writes;
  const res = await page.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume } }, headers: { 'if-match': before } });
  assert.is(res.status, 200, await res.clone().text());
  return { before, after: res.headers.get('etag')! };
}

test('If-Match on a read: a tag the settings no longer have is 412 with the current ETag; the current one, * or a list holding it is 200', async () => {
  const { before, after } = await moved();
  const stale = await get({ 'if-match': before });
  assert.is(stale.headers.get('etag'), after, 'the refusal carries the current tag');
  await assertApiError(stale, 412, 'settings_tag_mismatch');
  await assertApiError(await get({ 'if-match': `W/${after}` }), 412, 'settings_tag_mismatch');
  for (const ifMatch of [after, '*', `${before}, ${after}`]) {
    const res = await get({ 'if-match': ifMatch });
    assert.is(res.status, 200, `${ifMatch}: ${await res.clone().text()}`);
    assert.is(((await jsonOf(res)) as { etag: string }).etag, after);
  }
  await assertApiError(await get({ 'if-match': 'no-quotes' }), 400, 'if_match_invalid');
});

test('If-None-Match on a read: the current tag (weak or strong, or *) is 304 with it and no body; a stale one is 200', async () => {
  const { before, after } = await moved();
  for (const ifNoneMatch of [after, `W/${after}`, '*', `"ps1-other", ${after}`]) {
    const res = await get({ 'if-none-match': ifNoneMatch });
    assert.is(res.status, 304, `${ifNoneMatch}: ${res.status}`);
    assert.is(res.headers.get('etag'), after);
    assert.is(await res.text(), '');
  }
  const head = await get({ 'if-none-match': after }, 'HEAD');
  assert.is(head.status, 304);
  const changed = await get({ 'if-none-match': before });
  assert.is(changed.status, 200);
  assert.is(((await jsonOf(changed)) as { etag: string }).etag, after);
  // If-Match is decided first: a stale If-Match is 412 even when If-None-Match would be 304.
  await assertApiError(await get({ 'if-match': before, 'if-none-match': after }), 412, 'settings_tag_mismatch');
  await assertApiError(await get({ 'if-none-match': 'W/' }), 400, 'if_none_match_invalid');
});

test('a page may send If-None-Match cross-origin, and the API description documents both conditions, 304 and 412', async () => {
  const preflight = await fetch(`${server.url}${MEDIA}`, {
    method: 'OPTIONS',
    headers: { origin: world.origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'if-none-match' },
  });
  assert.is(preflight.status, 204);
  assert.ok((preflight.headers.get('access-control-allow-headers') ?? '').split(/,\s*/).includes('if-none-match'));
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { parameters: Array<{ name: string; in: string; required: boolean }>; responses: Record<string, { headers?: Record<string, unknown> }> }>>;
  };
  const read = doc.paths[MEDIA.replace('plg_media', '{pluginId}')]!.get!;
  for (const name of ['If-Match', 'If-None-Match']) assert.ok(read.parameters.some((p) => p.name === name && p.in === 'header' && !p.required), name);
  assert.ok(read.responses['304']!.headers!.ETag);
  assert.ok(read.responses['412']!.headers!.ETag);
});

test.run();
