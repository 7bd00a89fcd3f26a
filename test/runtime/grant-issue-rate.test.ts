import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { productParts } from '../../server/main.js';
import { GRANT_ISSUE_RATE } from '../../transport/http/routes/fenced-grant.schema.js';
import { assertProblem } from '../support/identity.js';
import { declareBackend, installPlugin, LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Issuing fenced grants is rate limited per person: each grant is a row until it is swept a day after it expired, so a
 * page issuing in a loop would grow the store without end. The clock only moves when told, so no token refills unasked.
 */
const clock = new ManualClock(Date.now());
let server: TestServer;
let ada: RuntimePerson;
let ben: RuntimePerson;
let world: TestEnvironment;
const controlGrant = { component: 'control', scopes: ['media:connect', 'media:join-space'], context: { scope: 'town-hall' } };

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV, clock);
test.before(async () => {
  ada = await runtimePerson(server, 'ada');
  ben = await runtimePerson(server, 'ben');
  ada.device.now = ben.device.now = () => clock.now();
  world = await testEnvironment(server.opsUrl, 'rate-world', 'ada');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
});

test('past a burst of Plugin Grants a person is refused 429 with Retry-After; others are not; time refills the bucket', async () => {
  const page = await (await ada.runtime(world)).open();
  for (let i = 0; i < GRANT_ISSUE_RATE.burst; i++) {
    const res = await page.pluginGrant('plg_media', controlGrant);
    assert.is(res.status, 201, `grant ${i}: ${await res.text()}`);
  }
  const refused = await page.pluginGrant('plg_media', controlGrant);
  assert.ok(Number(refused.headers.get('retry-after')) >= 1, `retry-after ${refused.headers.get('retry-after')}`);
  await assertProblem(refused, 429, 'rate_limited');
  // Another person's bucket is their own.
  const other = await (await ben.runtime(world)).open();
  assert.is((await other.pluginGrant('plg_media', controlGrant)).status, 201);
  clock.advance(60_000 / GRANT_ISSUE_RATE.perMinute);
  assert.is((await page.pluginGrant('plg_media', controlGrant)).status, 201, 'one more after one interval');
});

test('Environment Backend Grants have a bucket of their own, with the same limit', async () => {
  assert.is((await declareBackend(server.opsUrl, world.environmentId, { endpoint: 'https://api.rate-world.example/v1', scopes: ['orders:read'] })).status, 200);
  const page = await (await ben.runtime(world)).open();
  const issue = (): Promise<Response> => page.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body: { scopes: ['orders:read'] } });
  for (let i = 0; i < GRANT_ISSUE_RATE.burst; i++) {
    const res = await issue();
    assert.is(res.status, 201, `grant ${i}: ${await res.text()}`);
  }
  await assertProblem(await issue(), 429, 'rate_limited');
});

test.run();
