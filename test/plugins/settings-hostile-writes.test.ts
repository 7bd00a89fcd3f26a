import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertApiError } from '../support/identity.js';
import { installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Plugin settings writes under attack: a crowd of writers holding one tag (exactly one changes anything), bodies
 * shaped to hurt a validator (nesting as deep as the body limit allows, names every object has), and `If-Match`
 * forms RFC 9110 does not allow. Each is a 4xx with a stable code, and a refused write stores nothing.
 */
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';

interface Settings {
  layers: Record<string, Record<string, unknown>>;
  provenance: Record<string, string>;
  etag: string;
}

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  const pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'hostile-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  page = await (await pete.runtime(world)).open();
});

const read = async (): Promise<Settings> => {
  const res = await page.fenced(MEDIA);
  assert.is(res.status, 200);
  return (await jsonOf(res)) as unknown as Settings;
};
const put = (ifMatch: string, body: unknown): Promise<Response> => page.fenced(MEDIA, { method: 'PUT', body, headers: { 'if-match': ifMatch } });
const clear = (ifMatch: string, query: string): Promise<Response> => page.fenced(`${MEDIA}?${query}`, { method: 'DELETE', headers: { 'if-match': ifMatch } });
const putText = async (body: string): Promise<Response> =>
  fetch(`${server.url}${MEDIA}`, { method: 'PUT', headers: { ...page.headers({ active: true, json: true }), 'if-match': (await read()).etag }, body });

test('of seven writers holding one tag (PUTs to both own layers, DELETEs of a leaf), exactly one changes anything; the rest get 412 and the winner\'s tag', async () => {
  for (let round = 0; round < 5; round++) {
    const seeded = await put((await read()).etag, { layer: 'user', settings: { volume: 0.05 * (round + 1), defaultMuted: round % 2 === 0 } });
    assert.is(seeded.status, 200, await seeded.clone().text());
    const tag = seeded.headers.get('etag')!;
    const writers = Array.from({ length: 7 }, (_, i) =>
      i % 3 === 2
        ? clear(tag, 'layer=user&setting=volume')
        : put(tag, { layer: i % 2 === 0 ? 'user' : 'user_environment', settings: { volume: 0.05 * (10 + i + round) } }),
    );
    const answers = await Promise.all(writers);
    const won = answers.filter((res) => res.status === 200);
    const lost = answers.filter((res) => res.status === 412);
    assert.equal([won.length, lost.length], [1, 6], `round ${round}: ${answers.map((res) => res.status).join(' ')}`);
    const winner = (await jsonOf(won[0]!)) as unknown as Settings;
    for (const res of lost) {
      assert.is(res.headers.get('etag'), winner.etag, 'each loser is told the tag the winner left');
      await assertApiError(res, 412, 'settings_tag_mismatch');
    }
    assert.equal(await read(), winner, 'what is stored is what the winner answered');
  }
  // The later tests start from the person's own layers empty.
  for (const layer of ['user', 'user_environment']) {
    const res = await clear((await read()).etag, `layer=${layer}`);
    assert.ok(res.status === 200 || res.status === 204, `${layer}: ${res.status}`);
  }
  assert.equal((await read()).provenance, { defaultMuted: 'plugin_default', volume: 'plugin_default' });
});

test('bodies shaped to hurt a validator are 400 or 422 with pointers, never a 5xx, and store nothing', async () => {
  const before = await read();
  const depth = 8_000; // about the deepest nesting the 16 KiB body limit lets through
  const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`;
  for (const [body, pointer] of [
    [`{"layer":"user","settings":{"volume":${deep}}}`, '/settings/volume'],
    [`{"layer":"user","settings":{"volume":0.5},"x":${deep}}`, '/x'],
    [`{"layer":"user","settings":{"volume":{"value":0.5}}}`, '/settings/volume'],
    [`{"layer":"user","settings":{"volume":null}}`, '/settings/volume'],
    [`{"layer":"user","settings":{"volume":1e400}}`, '/settings/volume'],
  ] as const) {
    const res = await putText(body);
    const copy = res.clone();
    await assertApiError(res, 400, 'validation_failed');
    const details = ((await jsonOf(copy)).error as { details: Array<{ pointer: string }> }).details;
    assert.ok(details.some((d) => d.pointer === pointer), `${body.slice(0, 60)}: ${JSON.stringify(details)}`);
  }
  const inherited = await put(before.etag, { layer: 'user', settings: { constructor: 0.5, toString: true, hasOwnProperty: 'x' } });
  const copy = inherited.clone();
  await assertApiError(inherited, 422, 'setting_unknown');
  const details = ((await jsonOf(copy)).error as { details: Array<{ pointer: string; code: string }> }).details;
  assert.equal(details.map((d) => [d.pointer, d.code]), [['/settings/constructor', 'setting_unknown'], ['/settings/toString', 'setting_unknown'], ['/settings/hasOwnProperty', 'setting_unknown']]);
  await assertApiError(await clear(before.etag, 'layer=user&setting=constructor'), 422, 'setting_unknown');
  assert.equal(await read(), before);
});

test('If-Match forms RFC 9110 does not allow are 400; a weak tag never matches, the strong one beside it does', async () => {
  const { etag } = await read();
  const body = { layer: 'user', settings: { volume: 0.45 } };
  await assertApiError(await put(`w/${etag}`, body), 400, 'if_match_invalid');
  await assertApiError(await put(`*, ${etag}`, body), 400, 'if_match_invalid');
  await assertApiError(await put(etag.slice(1, -1), body), 400, 'if_match_invalid');
  await assertApiError(await put(`W/${etag}, W/"ps1-other"`, body), 412, 'settings_tag_mismatch');
  await assertApiError(await clear(`W/${etag}`, 'layer=user_environment'), 412, 'settings_tag_mismatch');
  assert.is((await read()).etag, etag, 'nothing was written');
  const res = await put(`W/${etag}, ${etag}`, body);
  assert.is(res.status, 200, await res.clone().text());
  assert.equal(((await jsonOf(res)) as unknown as Settings).provenance.volume, 'user');
});

test.run();
