import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { configureMedia, MediaControlClient, ALL_MEDIA_SCOPES, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { enrolAnother } from '../support/identity.js';

/**
 * A Media control connection lives no longer than its Plugin Grant: revoking the grant, or a device of the account
 * signing out (which ends the sign-in the grant was issued under), closes it at once with `session.ended`.
 */
let server: TestServer;
let lia: RuntimePerson;
let world: TestEnvironment;
let page: RuntimeClient;

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  lia = await runtimePerson(server, 'listener-lia');
  world = await testEnvironment(server.opsUrl, 'media-world', 'listener-lia');
  await configureMedia(server.opsUrl, world.environmentId, {
    directCalls: { enabled: true },
    spaces: [{ id: 'town-hall', policy: { mode: 'stage', maxParticipants: 150, maxSpeakerSeats: 2, floorControl: 'moderated', raiseHand: 'enabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } }],
  });
  page = await (await lia.runtime(world)).open();
});

test('revoking the Plugin Grant closes the Media control connection made with it', async () => {
  const res = await page.pluginGrant('plg_media', { component: 'control', scopes: ALL_MEDIA_SCOPES, context: { scope: 'town-hall' } });
  assert.is(res.status, 201);
  const { grant, grantId } = (await res.json()) as { grant: string; grantId: string };
  const conn = await MediaControlClient.connect(server.url, grant, world.origin);
  assert.is((await conn.request('ping')).ok, true);

  const del = await fetch(`${server.url}/v1/runtime/plugins/plg_media/grants/${grantId}`, { method: 'DELETE', headers: page.headers() });
  assert.is(del.status, 204);
  const introspected = await (await fetch(`${server.url}/v1/runtime/plugins/plg_media/grants/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant }) })).json();
  assert.equal(introspected, { active: false }, 'the registry itself says the grant is inactive');

  const closedWithin = await Promise.race([conn.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 2000))]);
  const stillServed = conn.closeCode === undefined ? (await conn.request('room.join', { rtpCapabilities: {} })).ok : false;
  conn.close();
  assert.ok(closedWithin, `connection still open 2 s after revocation; room.join with the revoked grant ok=${stillServed}`);
  assert.is(conn.closeCode, 4401);
});

test('the device signing out (account epoch raised) ends the grant, and the connection made with it', async () => {
  page = await (await lia.runtime(world)).open();
  const res = await page.pluginGrant('plg_media', { component: 'control', scopes: ALL_MEDIA_SCOPES, context: { scope: 'town-hall' } });
  assert.is(res.status, 201);
  const { grant } = (await res.json()) as { grant: string };
  const conn = await MediaControlClient.connect(server.url, grant, world.origin);
  assert.is((await conn.request('ping')).ok, true);
  // A device of two (the only one may not sign out).
  await enrolAnother(server.url, 'listener-lia', lia.device, 'lia phone');
  const out = await lia.device.request(server.url, 'POST', '/v1/account/sign-out');
  assert.is(out.status, 204, await out.clone().text());
  const introspected = await (await fetch(`${server.url}/v1/runtime/plugins/plg_media/grants/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant }) })).json();
  assert.equal(introspected, { active: false }, 'the registry itself says the grant is inactive');
  const closedWithin = await Promise.race([conn.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 2000))]);
  const stillServed = conn.closeCode === undefined ? (await conn.request('ping')).ok : false;
  conn.close();
  assert.ok(closedWithin, `connection still open 2 s after sign-out; requests still served=${stillServed}`);
  assert.is(conn.closeCode, 4401);
});

test.run();
