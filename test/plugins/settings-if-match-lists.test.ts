import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertApiError } from '../support/identity.js';
import { installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * `If-Match` is a list header (RFC 9110 13.1.1, `1#entity-tag`). A recipient must parse and ignore empty list
 * elements (RFC 9110 5.6.1.2): the leftovers of merging header lines or of a client joining tags with a stray comma.
 * A list that names the current tag among empty elements is a match, not a malformed header.
 */
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
let page: RuntimeClient;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'list-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  page = await (await pete.runtime(world)).open();
});

const tag = async (): Promise<string> => {
  const res = await page.fenced(MEDIA);
  assert.is(res.status, 200);
  return res.headers.get('etag')!;
};
const put = (ifMatch: string, volume: number): Promise<Response> =>
  page.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume } }, headers: { 'if-match': ifMatch } });

test('empty list elements between, before and after the tags are ignored: the current tag among them matches', async () => {
  for (const [shape, volume] of [['"ps1-older", , %', 0.25], [', %', 0.3], ['%, ,', 0.35], [' ,, "ps1-older" ,%', 0.4]] as const) {
    const current = await tag();
    const res = await put(shape.replace('%', current), volume);
    assert.is(res.status, 200, `${shape}: ${await res.clone().text()}`);
    assert.is(((await jsonOf(res)) as { resolved: { volume: number } }).resolved.volume, volume, shape);
  }
  const current = await tag();
  const cleared = await page.fenced(`${MEDIA}?layer=user`, { method: 'DELETE', headers: { 'if-match': `, ${current},` } });
  assert.is(cleared.status, 200, await cleared.clone().text());
});

test('empty elements around a stale tag are still a stale tag (412), and a list of nothing but commas is malformed (400)', async () => {
  await assertApiError(await put('"ps1-stale", ,', 0.5), 412, 'settings_tag_mismatch');
  await assertApiError(await put(' , ,', 0.5), 400, 'if_match_invalid');
  await assertApiError(await put(`, ${await tag()} junk`, 0.5), 400, 'if_match_invalid');
});

test.run();
