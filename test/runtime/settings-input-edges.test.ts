import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { declareBackend, installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Request members no schema sees (`__proto__`: JSON.parse makes it an own member, zod skips it) are refused, not
 * silently dropped; a `volume` that is not a multiple of 0.05, however close to zero, is refused.
 */
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
let page: RuntimeClient;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';
const ENDPOINT = 'https://api.edge-world.example/grants';

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'edge-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  page = await (await pete.runtime(world)).open();
});

const tag = async (): Promise<string> => (await page.fenced(MEDIA)).headers.get('etag')!;
/** A raw JSON text body (JSON.stringify cannot produce an own `__proto__` member). */
const putRaw = async (body: string): Promise<Response> =>
  fetch(`${server.url}${MEDIA}`, { method: 'PUT', headers: { ...page.headers({ active: true, json: true }), 'if-match': await tag() }, body });

test('a setting named __proto__ beside a valid one is refused, naming /settings/__proto__', async () => {
  const res = await putRaw('{"layer":"user","settings":{"volume":0.25,"__proto__":0.5}}');
  const body = (await jsonOf(res)) as { error: { code: string; details?: Array<{ pointer: string }> } };
  assert.is(res.status, 400);
  assert.equal([body.error.code, body.error.details?.map((d) => d.pointer)], ['validation_failed', ['/settings/__proto__']]);
  // Escaped, it is the same member name once parsed.
  assert.is((await putRaw('{"layer":"user","settings":{"volume":0.25,"\\u005f_proto__":0.5}}')).status, 400);
  assert.is((await page.fenced(MEDIA).then(jsonOf) as { layers: { user: Record<string, unknown> } }).layers.user.volume, undefined, 'nothing was written');
});

test('a body naming only __proto__ is refused for that member, not as naming no setting', async () => {
  const res = await putRaw('{"layer":"user","settings":{"__proto__":0.5}}');
  const body = (await jsonOf(res)) as { error: { code: string; details?: Array<{ pointer: string; message: string }> } };
  assert.ok(
    body.error.details?.some((d) => d.pointer === '/settings/__proto__'),
    `refused with ${res.status} ${JSON.stringify(body.error.details)}: the member it names is not mentioned`,
  );
});

test('query parameters named like members of every object are parameters like any other', async () => {
  const etag = await tag();
  for (const name of ['constructor', 'toString', '__proto__']) {
    const res = await fetch(`${server.url}${MEDIA}?layer=user&${name}=x`, { method: 'DELETE', headers: { ...page.headers({ active: true }), 'if-match': etag } });
    const body = (await jsonOf(res)) as { error: { code: string; details?: Array<{ pointer: string; message: string }> } };
    assert.is(res.status, 400, name);
    assert.equal(body.error.details?.map((d) => d.pointer), [`/${name}`], JSON.stringify(body.error.details));
  }
});

test('a Backend Grant context member __proto__ is refused like any key outside the pattern', async () => {
  assert.is((await declareBackend(server.opsUrl, world.environmentId, { endpoint: ENDPOINT, scopes: ['orders:read'] })).status, 200);
  const res = await fetch(`${server.url}/v1/runtime/environment-backend/grants`, {
    method: 'POST',
    headers: page.headers({ active: true, json: true }),
    body: '{"scopes":["orders:read"],"context":{"order":"o-1","__proto__":"x"}}',
  });
  const text = await res.text();
  const underscore = await fetch(`${server.url}/v1/runtime/environment-backend/grants`, {
    method: 'POST',
    headers: page.headers({ active: true, json: true }),
    body: '{"scopes":["orders:read"],"context":{"order":"o-1","_x":"x"}}',
  });
  assert.is(underscore.status, 400, 'any other key outside the pattern is refused');
  assert.is(res.status, 400, `answered ${res.status} ${text.slice(0, 200)}; the context key pattern ^[A-Za-z][A-Za-z0-9_.-]{0,63}$ refuses a key starting with _, e.g. _x`);
});

test('a volume below half a step yet not zero (1e-20) is not a multiple of 0.05: refused', async () => {
  for (const volume of [1e-20, 1e-17]) {
    const res = await putRaw(JSON.stringify({ layer: 'user', settings: { volume } }));
    const body = (await jsonOf(res)) as { resolved?: { volume?: number } };
    assert.is(res.status, 422, `volume ${volume}: answered ${res.status}, resolved volume ${String(body.resolved?.volume)}`);
  }
});

test.run();
