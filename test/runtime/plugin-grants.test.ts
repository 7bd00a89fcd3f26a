import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { mediaPlugin } from '../../plugins/media/media.plugin.js';
import { PluginGrants } from '../../runtime/plugin-grants.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertApiError, assertProblem } from '../support/identity.js';
import { installPlugin, logoutBrowser, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * Plugin Grants through HTTP against the real server: the fence and each refusal first, then issue, introspection,
 * and every way a grant ends (revocation, supersession, logout, expiry).
 */
const clock = new ManualClock(Date.now());
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let ada: RuntimePerson;
let ben: RuntimePerson;
/** Owned by ada; Media installed. */
let world: TestEnvironment;
/** Owned by ada; nothing installed. */
let bare: TestEnvironment;
let adaInWorld: RuntimeClient;
let benInWorld: RuntimeClient;

const MEDIA_GRANTS = '/v1/runtime/plugins/plg_media/grants';
const controlGrant = (scopes: string[] = ['media:connect', 'media:join-space'], context: unknown = { scope: 'town-hall' }) => ({ component: 'control', scopes, context });

interface IssuedGrant {
  grantId: string;
  grant: string;
  tokenType: string;
  pluginId: string;
  component: string;
  scopes: string[];
  context: Record<string, string>;
  expiresAt: string;
  expiresIn: number;
}

async function issue(client: RuntimeClient, body = controlGrant()): Promise<IssuedGrant> {
  const res = await client.pluginGrant('plg_media', body);
  assert.is(res.status, 201, await res.clone().text());
  return (await jsonOf(res)) as unknown as IssuedGrant;
}

async function introspect(grant: string, pluginId = 'plg_media'): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.url}/v1/runtime/plugins/${pluginId}/grants/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant }) });
  assert.is(res.status, 200);
  return (await res.json()) as Record<string, unknown>;
}

test.before(async () => {
  db = await createTestDatabase();
  // A lease outliving the grant, so expiry is the grant's own.
  server = await startTestServer(db.url, productParts, { RUNTIME_LEASE_TTL_SECONDS: '3600' }, clock);
  ada = await runtimePerson(server, 'ada');
  ben = await runtimePerson(server, 'ben');
  ada.device.now = ben.device.now = () => clock.now();
  world = await testEnvironment(server.opsUrl, 'grant-world', 'ada');
  bare = await testEnvironment(server.opsUrl, 'bare-world', 'ada');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
  adaInWorld = await (await ada.runtime(world)).open();
  benInWorld = await (await ben.runtime(world)).open();
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('the fence: no token, no lease, a standby session are refused before anything is issued', async () => {
  await assertProblem(await fetch(`${server.url}${MEDIA_GRANTS}`, { method: 'POST', headers: { origin: world.origin, 'content-type': 'application/json' }, body: JSON.stringify(controlGrant()) }), 401, 'runtime_token_invalid');
  const standby = await ben.runtime(world);
  await standby.createSession();
  await assertProblem(await standby.pluginGrant('plg_media', controlGrant()), 409, 'runtime_session_standby');
  standby.lease = benInWorld.lease;
  await assertProblem(await standby.pluginGrant('plg_media', controlGrant()), 409, 'runtime_session_standby');
  const rows = await db.connection.db.selectFrom('plugin_grants').select('id').execute();
  assert.equal(rows, [], 'nothing was issued');
});

test('refusals: a Plugin not installed, an unknown component, a scope the component does not grant', async () => {
  const inBare = await (await ada.runtime(bare)).open();
  await assertApiError(await inBare.pluginGrant('plg_media', controlGrant()), 404, 'plugin_not_installed');
  await assertApiError(await inBare.pluginGrant('plg_nothing', controlGrant()), 404, 'plugin_not_installed');
  // ada's lease is now her Runtime in bare-world: take it back.
  adaInWorld = await (await ada.runtime(world)).open();

  await assertApiError(await adaInWorld.pluginGrant('plg_media', { ...controlGrant(), component: 'recorder' }), 422, 'plugin_component_unknown');
  const res = await adaInWorld.pluginGrant('plg_media', controlGrant(['media:connect', 'media:record']));
  await assertApiError(res.clone(), 422, 'scope_not_declared');
  const body = ((await res.json()) as { error: { details: Array<{ pointer: string }> } }).error;
  assert.equal(body.details.map((d) => d.pointer), ['/scopes/1']);
  await assertApiError(await adaInWorld.pluginGrant('plg_media', controlGrant(['media:connect', 'media:connect'])), 400, 'validation_failed');
  await assertApiError(await adaInWorld.pluginGrant('plg_media', controlGrant([])), 400, 'validation_failed');
});

test('the context is exactly one property `scope`: 1–96 characters of the pattern, nothing else', async () => {
  const refused = async (context: unknown, pointer: string): Promise<void> => {
    const res = await adaInWorld.pluginGrant('plg_media', controlGrant(undefined, context));
    await assertApiError(res.clone(), 422, 'grant_context_invalid');
    const body = ((await res.json()) as { error: { details: Array<{ pointer: string }> } }).error;
    assert.ok(body.details.some((d) => d.pointer === pointer), `${JSON.stringify(context)} → ${JSON.stringify(body.details)}`);
  };
  await refused({}, '/context/scope');
  await refused({ scope: '' }, '/context/scope');
  await refused({ scope: '-leading-dash' }, '/context/scope');
  await refused({ scope: 'a'.repeat(97) }, '/context/scope');
  await refused({ scope: 'has space' }, '/context/scope');
  await refused({ scope: 42 }, '/context/scope');
  await refused({ scope: 'town-hall', room: 'x' }, '/context/room');
  const longest = await issue(adaInWorld, controlGrant(undefined, { scope: `A${'b:_-'.repeat(23)}xyz` }));
  assert.is(longest.context.scope?.length, 96);
});

test('the platform permission: a release that does not request plugin-grant:request gets no grant', async () => {
  const withoutPermission = { ...mediaPlugin, platformPermissions: mediaPlugin.platformPermissions.filter((p) => p !== 'plugin-grant:request') };
  const grants = new PluginGrants(db.connection.db, clock, undefined as never, async () => true, async () => withoutPermission);
  const caller = { accountId: ada.accountId, actorId: 'act_x', environmentId: world.environmentId, origin: world.origin, grantId: 'g', browserId: 'b' };
  try {
    await grants.issue(caller, { sessionId: 's', leaseId: 'l', leaseVersion: 1 }, 'plg_media', controlGrant(), []);
    assert.unreachable('issued');
  } catch (error) {
    assert.is((error as { code?: string }).code, 'plugin_permission_not_requested');
    assert.is((error as { status?: number }).status, 403);
  }
});

test('issue and introspect: the registry derives actor, origin, roles and fence; another Plugin sees it inactive', async () => {
  const issued = await issue(adaInWorld, controlGrant(['media:connect', 'media:join-space', 'media:publish']));
  assert.match(issued.grantId, /^pgr_/);
  assert.equal([issued.tokenType, issued.pluginId, issued.component, issued.expiresIn], ['Bearer', 'plg_media', 'control', 300]);
  assert.equal(issued.scopes, ['media:connect', 'media:join-space', 'media:publish']);
  assert.equal(issued.context, { scope: 'town-hall' });
  const seen = await introspect(issued.grant);
  assert.is(seen.active, true);
  assert.match(String(seen.actorId), /^act_/);
  assert.is(seen.environmentId, world.environmentId);
  assert.is(seen.origin, world.origin);
  assert.equal(seen.environmentRoles, ['admin'], 'ada owns the Environment');
  assert.equal(seen.session, { sessionId: adaInWorld.sessionId, leaseVersion: adaInWorld.lease!.leaseVersion });
  assert.not.ok(JSON.stringify(seen).includes(ada.accountId), 'the private account id never reaches a backend');
  assert.equal(await introspect(issued.grant, 'plg_other'), { active: false });
  assert.equal(await introspect('pgt_unknown'), { active: false });
  const bens = await introspect((await issue(benInWorld)).grant);
  assert.equal(bens.environmentRoles, []);
});

test('revocation, supersession and browser logout end a grant at once', async () => {
  const revoked = await issue(adaInWorld);
  const del = await fetch(`${server.url}${MEDIA_GRANTS}/${revoked.grantId}`, { method: 'DELETE', headers: adaInWorld.headers() });
  assert.is(del.status, 204);
  assert.equal(await introspect(revoked.grant), { active: false });
  await assertProblem(await fetch(`${server.url}${MEDIA_GRANTS}/${(await issue(benInWorld)).grantId}`, { method: 'DELETE', headers: adaInWorld.headers() }), 404, 'plugin_grant_not_found');

  const superseded = await issue(adaInWorld);
  assert.is((await introspect(superseded.grant)).active, true);
  adaInWorld = await (await ada.runtime(world)).open();
  assert.equal(await introspect(superseded.grant), { active: false }, 'a newer Runtime of the person took the lease');

  const loggedOut = await issue(benInWorld);
  assert.is((await logoutBrowser(server.url, ben)).status, 200);
  assert.equal(await introspect(loggedOut.grant), { active: false });
});

test('expiry: five minutes after issue the grant is inactive', async () => {
  const issued = await issue(adaInWorld);
  clock.advance(299_000);
  assert.is((await introspect(issued.grant)).active, true);
  clock.advance(1_000);
  assert.equal(await introspect(issued.grant), { active: false });
});

test.run();
