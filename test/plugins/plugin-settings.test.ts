import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertApiError, assertProblem } from '../support/identity.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { runRegistryAdmin } from '../support/process.js';
import { startTestServer } from '../support/server.js';

/**
 * Runtime Plugin settings through HTTP against the real server: the fence, installation, If-Match, scopes, the
 * environment layer's admin, concurrent writers, leaves that fail the schema, provenance and layering, empty clears.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let olga: RuntimePerson;
let pete: RuntimePerson;
/** Owned by olga; Media installed. */
let world: TestEnvironment;
/** Owned by olga; Media installed: where pete's `user` layer must follow him. */
let second: TestEnvironment;
/** Owned by pete; nothing installed. */
let bare: TestEnvironment;
let peteInWorld: RuntimeClient;
let olgaInWorld: RuntimeClient;

const MEDIA = '/v1/runtime/plugins/plg_media/settings';

interface Settings {
  pluginId: string;
  schemaVersion: string;
  resolved: Record<string, unknown>;
  layers: Record<'plugin_default' | 'environment' | 'user' | 'user_environment', Record<string, unknown>>;
  provenance: Record<string, string>;
  etag: string;
}

const admin = (args: string[]) => runRegistryAdmin(server.opsUrl, 'ops-sam', args);

test.before(async () => {
  db = await createTestDatabase();
  // peteInWorld and olgaInWorld are opened in one test and used by the later ones.
  server = await startTestServer(db.url, productParts, LONG_LEASE_ENV);
  olga = await runtimePerson(server, 'olga');
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'settings-world', 'olga');
  second = await testEnvironment(server.opsUrl, 'second-world', 'olga');
  bare = await testEnvironment(server.opsUrl, 'bare-world', 'pete');
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

/** GET, checking that the body's `etag` is the `ETag` header. */
async function read(client: RuntimeClient, at = MEDIA): Promise<Settings> {
  const res = await client.fenced(at);
  assert.is(res.status, 200, await res.clone().text());
  const body = (await jsonOf(res)) as unknown as Settings;
  assert.is(body.etag, res.headers.get('etag'));
  return body;
}

const put = (client: RuntimeClient, ifMatch: string | undefined, body: unknown): Promise<Response> =>
  client.fenced(MEDIA, { method: 'PUT', body, headers: ifMatch === undefined ? {} : { 'if-match': ifMatch } });

const clear = (client: RuntimeClient, ifMatch: string | undefined, query: string): Promise<Response> =>
  client.fenced(`${MEDIA}?${query}`, { method: 'DELETE', headers: ifMatch === undefined ? {} : { 'if-match': ifMatch } });

/** Every persisted leaf of the Media plugin, as `layer/owner/setting=value`, for checking what was (not) stored. */
async function storedLeaves(): Promise<string[]> {
  const rows = await db.connection.db.selectFrom('plugin_settings').selectAll().where('plugin_id', '=', 'plg_media').orderBy('layer').orderBy('environment_id').orderBy('account_id').orderBy('setting').execute();
  return rows.map((r) => `${r.layer}/${r.environment_id}/${r.account_id === pete.accountId ? 'pete' : r.account_id === olga.accountId ? 'olga' : r.account_id}/${r.setting}=${JSON.stringify(r.value)}`);
}

test('operators install Plugins per Environment with registry-admin, audited; refusals name what is missing', async () => {
  const unknownPlugin = await admin(['plugin', 'install', '--environment', world.environmentId, '--plugin', 'plg_nothing']);
  assert.is(unknownPlugin.code, 1);
  assert.match(unknownPlugin.stderr, /plugin_not_found/);
  const unknownEnvironment = await admin(['plugin', 'install', '--environment', 'no-such-world', '--plugin', 'plg_media']);
  assert.match(unknownEnvironment.stderr, /environment_not_found/);
  const usage = await admin(['plugin', 'install', '--plugin', 'plg_media']);
  assert.is(usage.code, 2);
  assert.match(usage.stderr, /--environment is required/);

  for (const environment of [world, second]) {
    const done = await admin(['plugin', 'install', '--environment', environment.environmentId, '--plugin', 'plg_media']);
    assert.is(done.code, 0, done.stderr);
    assert.equal(JSON.parse(done.stdout), { environmentId: environment.environmentId, pluginId: 'plg_media', version: '0.1.0-alpha.29', changed: true });
  }
  const again = JSON.parse((await admin(['plugin', 'install', '--environment', world.environmentId, '--plugin', 'plg_media'])).stdout) as { changed: boolean };
  assert.is(again.changed, false, 'installing again changes nothing');
  const listed = JSON.parse((await admin(['plugin', 'list', '--environment', world.environmentId])).stdout) as { plugins: Array<Record<string, string>> };
  assert.equal(listed.plugins.map((p) => [p.pluginId, p.settingsSchemaVersion, p.installedBy]), [['plg_media', '1.0.0', 'operator:ops-sam']]);
  assert.equal(JSON.parse((await admin(['plugin', 'list', '--environment', bare.environmentId])).stdout), { environmentId: bare.environmentId, plugins: [] });
  const audit = JSON.parse((await admin(['audit', 'list', '--target', `environment:${world.environmentId}`])).stdout) as { events: Array<{ action: string; actor: string; data: Record<string, string> }> };
  assert.equal(
    audit.events.filter((e) => e.action === 'plugin.install').map((e) => [e.actor, e.data.pluginId, e.data.settingsSchemaVersion]),
    [['operator:ops-sam', 'plg_media', '1.0.0']],
    'one audit event, for the call that installed it',
  );

  peteInWorld = await (await pete.runtime(world)).open();
  olgaInWorld = await (await olga.runtime(world)).open();
});

test('the Runtime fence: no token, no session, a standby session, a superseded one, a stale lease version', async () => {
  await assertProblem(await fetch(`${server.url}${MEDIA}`, { headers: { origin: world.origin } }), 401, 'runtime_token_invalid');
  const page = await pete.runtime(world);
  await assertProblem(await page.fenced(MEDIA), 400, 'runtime_session_required');
  await page.createSession();
  await assertProblem(await page.fenced(MEDIA), 409, 'runtime_session_standby');
  page.lease = peteInWorld.lease;
  await assertProblem(await page.fenced(MEDIA), 409, 'runtime_session_standby');

  const first = await (await pete.runtime(second)).open();
  const taken = (await read(first, MEDIA)).etag;
  const later = await (await pete.runtime(second)).open();
  await assertProblem(await first.fenced(MEDIA), 409, 'runtime_session_superseded');
  await assertProblem(await put(first, taken, { layer: 'user', settings: { volume: 0.1 } }), 409, 'runtime_session_superseded');
  await assertProblem(await clear(first, taken, 'layer=user'), 409, 'runtime_session_superseded');
  const stale = { ...later.lease!, leaseVersion: later.lease!.leaseVersion + 1 };
  const forged = await pete.runtime(second);
  forged.sessionId = later.sessionId;
  forged.lease = stale;
  await assertProblem(await forged.fenced(MEDIA), 409, 'runtime_lease_stale');
  assert.equal(await storedLeaves(), [], 'no refused call wrote anything');
  // Pete's lease is now his Runtime in second-world; take it back for the tests below.
  peteInWorld = await (await pete.runtime(world)).open();
});

test('a Plugin the caller\'s Environment has not installed is 404, though another Environment has it', async () => {
  const inBare = await (await olga.runtime(bare)).open();
  await assertApiError(await inBare.fenced(MEDIA), 404, 'plugin_not_installed');
  await assertApiError(await put(inBare, '"anything"', { layer: 'user', settings: { volume: 0.5 } }), 404, 'plugin_not_installed');
  await assertApiError(await clear(inBare, '"anything"', 'layer=user'), 404, 'plugin_not_installed');
  await assertApiError(await inBare.fenced('/v1/runtime/plugins/plg_nothing/settings'), 404, 'plugin_not_installed');
  await assertApiError(await inBare.fenced('/v1/runtime/plugins/media/settings'), 400, 'validation_failed');
  olgaInWorld = await (await olga.runtime(world)).open();
});

test('If-Match: missing or * is 428, malformed 400, weak or stale 412 with the current ETag; nothing is written', async () => {
  const current = await read(peteInWorld);
  const body = { layer: 'user', settings: { volume: 0.5 } };
  await assertApiError(await put(peteInWorld, undefined, body), 428, 'if_match_required');
  await assertApiError(await put(peteInWorld, '*', body), 428, 'if_match_required');
  await assertApiError(await put(peteInWorld, 'no-quotes', body), 400, 'if_match_invalid');
  await assertApiError(await put(peteInWorld, `W/${current.etag}`, body), 412, 'settings_tag_mismatch');
  const stale = await put(peteInWorld, '"ps1-stale"', body);
  await assertApiError(stale, 412, 'settings_tag_mismatch');
  assert.is(stale.headers.get('etag'), current.etag, 'the refusal carries the current tag');
  await assertApiError(await clear(peteInWorld, undefined, 'layer=user'), 428, 'if_match_required');
  await assertApiError(await clear(peteInWorld, '"ps1-stale"', 'layer=user'), 412, 'settings_tag_mismatch');
  assert.equal(await read(peteInWorld), current);
  assert.equal(await storedLeaves(), []);
  // A list naming the current tag among others matches.
  const listed = await put(peteInWorld, `"ps1-older", ${current.etag}`, { layer: 'user', settings: { volume: 0.45 } });
  assert.is(listed.status, 200, await listed.clone().text());
  const after = (await jsonOf(listed)) as unknown as Settings;
  const undo = await clear(peteInWorld, after.etag, 'layer=user');
  assert.is(undo.status, 200);
  assert.is(((await jsonOf(undo)) as unknown as Settings).etag, current.etag, 'the same representation has the same tag');
});

test('each setting only at its scopes: session settings are never stored, volume not at environment, unknown and invalid values refused', async () => {
  const { etag } = await read(peteInWorld);
  const refused = async (body: unknown, status: number, code: string, errors?: Array<[string, string]>): Promise<void> => {
    const res = await put(peteInWorld, etag, body);
    const copy = res.clone();
    await assertApiError(res, status, code);
    if (errors) assert.equal((((await jsonOf(copy)).error as { details: unknown }).details as Array<{ pointer: string; code: string }>).map((e) => [e.pointer, e.code]), errors);
  };
  await refused({ layer: 'user', settings: { inputDeviceId: 'mic-1' } }, 422, 'setting_session_scoped', [['/settings/inputDeviceId', 'setting_session_scoped']]);
  await refused({ layer: 'user_environment', settings: { outputDeviceId: 'speaker-2' } }, 422, 'setting_session_scoped');
  await refused({ layer: 'user', settings: { brightness: 1 } }, 422, 'setting_unknown', [['/settings/brightness', 'setting_unknown']]);
  for (const volume of [0.33, 1.5, -0.05, 'loud', true]) {
    await refused({ layer: 'user', settings: { volume } }, 422, 'setting_value_invalid', [['/settings/volume', 'setting_value_invalid']]);
  }
  await refused({ layer: 'user', settings: { defaultMuted: 'yes' } }, 422, 'setting_value_invalid');
  // Every refused leaf is named; the code is the first refusal in the documented order; valid leaves are not written either.
  await refused({ layer: 'user', settings: { volume: 2, outputDeviceId: 'x', defaultMuted: false } }, 422, 'setting_session_scoped', [
    ['/settings/volume', 'setting_value_invalid'],
    ['/settings/outputDeviceId', 'setting_session_scoped'],
  ]);
  await refused({ layer: 'plugin_default', settings: { volume: 0.5 } }, 400, 'validation_failed');
  await refused({ layer: 'session', settings: { inputDeviceId: 'mic-1' } }, 400, 'validation_failed');
  await refused({ layer: 'user', settings: {} }, 400, 'validation_failed');
  await refused({ layer: 'user', settings: { volume: null } }, 400, 'validation_failed');
  const query = await clear(peteInWorld, etag, 'layer=user&setting=volume&setting=inputDeviceId');
  await assertApiError(query.clone(), 422, 'setting_session_scoped');
  assert.equal((((await jsonOf(query)).error as { details: unknown }).details as Array<{ pointer: string; in: string }>).map((e) => [e.in, e.pointer]), [['query', '/setting/1']]);

  // Media 1.0.0 allows volume and defaultMuted only at plugin_default, user and user_environment: not even the
  // Environment's admin may set them for everyone.
  const owner = await read(olgaInWorld);
  const res = await put(olgaInWorld, owner.etag, { layer: 'environment', settings: { volume: 0.5, defaultMuted: false } });
  await assertApiError(res.clone(), 422, 'setting_scope_not_allowed');
  assert.equal((((await jsonOf(res)).error as { details: unknown }).details as Array<{ pointer: string }>).map((e) => e.pointer), ['/settings/volume', '/settings/defaultMuted']);
  assert.equal(await storedLeaves(), []);
});

test('the environment layer belongs to the Environment admin (its owner): anyone else gets 403, whatever the settings named', async () => {
  const { etag } = await read(peteInWorld);
  await assertProblem(await put(peteInWorld, etag, { layer: 'environment', settings: { volume: 0.5 } }), 403, 'environment_admin_required');
  await assertProblem(await clear(peteInWorld, etag, 'layer=environment'), 403, 'environment_admin_required');
  const owner = await read(olgaInWorld);
  const cleared = await clear(olgaInWorld, owner.etag, 'layer=environment');
  assert.is(cleared.status, 204, 'the owner may clear it; it was empty');
});

test('layers: user_environment over user over plugin_default, provenance per leaf, inherited values never copied, user follows the person', async () => {
  const start = await read(peteInWorld);
  assert.equal(start.layers, { plugin_default: { defaultMuted: true, volume: 0.8 }, environment: {}, user: {}, user_environment: {} });
  assert.equal(start.provenance, { defaultMuted: 'plugin_default', volume: 'plugin_default' });
  assert.is(start.schemaVersion, '1.0.0');

  const user = await put(peteInWorld, start.etag, { layer: 'user', settings: { volume: 0.35 } });
  assert.is(user.status, 200, await user.clone().text());
  const afterUser = (await jsonOf(user)) as unknown as Settings;
  assert.is(afterUser.etag, user.headers.get('etag'));
  assert.is.not(afterUser.etag, start.etag);
  assert.equal(afterUser.layers.user, { volume: 0.35 }, 'defaultMuted was not copied into the user layer');
  assert.equal(afterUser.resolved, { defaultMuted: true, volume: 0.35 });
  assert.equal(afterUser.provenance, { defaultMuted: 'plugin_default', volume: 'user' });

  const local = await put(peteInWorld, afterUser.etag, { layer: 'user_environment', settings: { defaultMuted: false } });
  const afterLocal = (await jsonOf(local)) as unknown as Settings;
  assert.equal(afterLocal.layers.user_environment, { defaultMuted: false }, 'volume was not copied from the user layer');
  assert.equal(afterLocal.provenance, { defaultMuted: 'user_environment', volume: 'user' });
  const merged = await put(peteInWorld, afterLocal.etag, { layer: 'user_environment', settings: { volume: 0.6 } });
  const afterMerge = (await jsonOf(merged)) as unknown as Settings;
  assert.equal(afterMerge.layers.user_environment, { defaultMuted: false, volume: 0.6 }, 'a write merges into its layer');
  assert.equal(afterMerge.resolved, { defaultMuted: false, volume: 0.6 });
  assert.equal(afterMerge.provenance, { defaultMuted: 'user_environment', volume: 'user_environment' });
  assert.equal(await read(peteInWorld), afterMerge, 'a read answers what the write did');
  assert.equal(await storedLeaves(), ['user//pete/volume=0.35', 'user_environment/settings-world/pete/defaultMuted=false', 'user_environment/settings-world/pete/volume=0.6']);

  // In another Environment the user layer applies, the user_environment layer of settings-world does not.
  const elsewhere = await read(await (await pete.runtime(second)).open());
  assert.equal(elsewhere.layers, { plugin_default: { defaultMuted: true, volume: 0.8 }, environment: {}, user: { volume: 0.35 }, user_environment: {} });
  assert.equal(elsewhere.provenance, { defaultMuted: 'plugin_default', volume: 'user' });
  // Olga shares none of it.
  assert.equal((await read(olgaInWorld)).provenance, { defaultMuted: 'plugin_default', volume: 'plugin_default' });
  peteInWorld = await (await pete.runtime(world)).open();

  // Clearing one setting of a layer, then the layer: each answers the settings after it.
  const one = await clear(peteInWorld, afterMerge.etag, 'layer=user_environment&setting=volume');
  assert.is(one.status, 200);
  const afterOne = (await jsonOf(one)) as unknown as Settings;
  assert.equal(afterOne.provenance, { defaultMuted: 'user_environment', volume: 'user' });
  const all = await clear(peteInWorld, afterOne.etag, 'layer=user_environment');
  assert.equal(((await jsonOf(all)) as unknown as Settings).layers.user_environment, {});
});

test('DELETE of an already-empty layer (or of settings it lacks) with the current tag is 204 with that tag; a stale tag still 412', async () => {
  const current = await read(peteInWorld);
  assert.equal(current.layers.user_environment, {});
  const empty = await clear(peteInWorld, current.etag, 'layer=user_environment');
  assert.is(empty.status, 204);
  assert.is(empty.headers.get('etag'), current.etag);
  assert.is(await empty.text(), '');
  const absent = await clear(peteInWorld, current.etag, 'layer=user&setting=defaultMuted');
  assert.is(absent.status, 204, 'the user layer holds volume only');
  await assertApiError(await clear(peteInWorld, '"ps1-stale"', 'layer=user_environment'), 412, 'settings_tag_mismatch');
  assert.equal(await read(peteInWorld), current);
});

test('two writers with the same tag: exactly one wins and the other gets 412, whichever layers they write', async () => {
  for (let round = 0; round < 6; round++) {
    const { etag } = await read(peteInWorld);
    const layers = round % 2 === 0 ? ['user', 'user'] : ['user', 'user_environment'];
    const results = await Promise.all(
      layers.map((layer, i) => put(peteInWorld, etag, { layer, settings: { volume: (round * 2 + i + 1) / 20 } })),
    );
    const statuses = results.map((r) => r.status).sort();
    assert.equal(statuses, [200, 412], `round ${round}: ${statuses.join(' ')}`);
    const winner = results.find((r) => r.status === 200)!;
    const loser = results.find((r) => r.status === 412)!;
    const won = (await jsonOf(winner)) as unknown as Settings;
    assert.is(loser.headers.get('etag'), won.etag, 'the loser is told the tag the winner left');
    assert.equal(await read(peteInWorld), won);
  }
  // The owner's environment-layer clear and a person's write race on the same Environment lock without deadlock.
  const [p, o] = await Promise.all([read(peteInWorld), read(olgaInWorld)]);
  const raced = await Promise.all([put(peteInWorld, p.etag, { layer: 'user', settings: { defaultMuted: false } }), clear(olgaInWorld, o.etag, 'layer=environment')]);
  assert.equal(raced.map((r) => r.status), [200, 204]);
});

test('persisted leaves that no longer satisfy the installed schema are never delivered, nor move the tag; clearing removes them', async () => {
  // Start from known layers: user_environment empty, user with both settings.
  const start = await read(peteInWorld);
  const emptied = await clear(peteInWorld, start.etag, 'layer=user_environment');
  const reset = await put(peteInWorld, emptied.headers.get('etag') ?? '', { layer: 'user', settings: { volume: 0.5, defaultMuted: false } });
  assert.is(reset.status, 200, await reset.clone().text());
  const before = await read(peteInWorld);
  const at = new Date();
  const leaf = (layer: 'environment' | 'user' | 'user_environment', setting: string, value: unknown) => ({
    plugin_id: 'plg_media',
    layer,
    environment_id: layer === 'user' ? '' : world.environmentId,
    account_id: layer === 'environment' ? '' : pete.accountId,
    setting,
    value: JSON.stringify(value),
    updated_at: at,
  });
  // Fixture: rows an older schema (or a bug) could have left: unknown setting, wrong type, out of bounds, off the
  // 0.05 grid, a scope no longer allowed, a session setting.
  await db.connection.db
    .insertInto('plugin_settings')
    .values([
      leaf('user_environment', 'volume', 1.5),
      leaf('user_environment', 'defaultMuted', 'no'),
      leaf('user_environment', 'brightness', 0.5),
      leaf('user_environment', 'inputDeviceId', 'mic-1'),
      leaf('environment', 'volume', 0.2),
      leaf('environment', 'defaultMuted', false),
    ])
    .execute();
  await db.connection.db
    .updateTable('plugin_settings')
    .set({ value: JSON.stringify(0.42) })
    .where('layer', '=', 'user')
    .where('account_id', '=', pete.accountId)
    .where('setting', '=', 'volume')
    .execute();
  const after = await read(peteInWorld);
  assert.equal(after.layers.user_environment, {});
  assert.equal(after.layers.environment, {});
  assert.equal(after.layers.user, { defaultMuted: false }, 'volume 0.42 is off the grid');
  assert.equal(after.resolved, { defaultMuted: false, volume: 0.8 });
  assert.equal(after.provenance, { defaultMuted: 'user', volume: 'plugin_default' });
  assert.is.not(after.etag, before.etag, 'the user volume stopped being delivered');
  assert.equal((await read(olgaInWorld)).layers.environment, {}, 'nor to anyone else in the Environment');

  // The user_environment layer delivers nothing, so clearing it is 204, and it removes the rows that failed.
  const cleared = await clear(peteInWorld, after.etag, 'layer=user_environment');
  assert.is(cleared.status, 204);
  assert.equal(await read(peteInWorld), after);
  assert.ok(!(await storedLeaves()).some((l) => l.startsWith('user_environment/')));
  // A write over a failing leaf replaces it.
  const fixed = await put(peteInWorld, after.etag, { layer: 'user', settings: { volume: 0.4 } });
  assert.equal(((await jsonOf(fixed)) as unknown as Settings).provenance, { defaultMuted: 'user', volume: 'user' });
});

test('the API description documents the three operations with If-Match and ETag (also on the 412 that carries the current tag)', async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string; required: boolean }>; responses: Record<string, { headers?: Record<string, unknown> }> }>>;
  };
  const item = doc.paths['/v1/runtime/plugins/{pluginId}/settings']!;
  assert.equal(Object.keys(item).sort(), ['delete', 'get', 'put']);
  for (const method of ['put', 'delete']) {
    assert.ok(item[method]!.parameters!.some((p) => p.name === 'If-Match' && p.in === 'header' && p.required), method);
    for (const status of ['412', '428', '422', '404', '409']) assert.ok(item[method]!.responses[status], `${method} ${status}`);
    // A 412 carries the current tag (the If-Match test above reads it from there).
    assert.ok(item[method]!.responses['412']!.headers!.ETag, `${method} 412 ETag`);
  }
  assert.ok(item.get!.responses['200']!.headers!.ETag);
  assert.ok(item.delete!.responses['204']!.headers!.ETag);
});

test('the write descriptions name the member a refusal really carries its pointers in, and every If-Match code', async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, { description: string }>> };
  const { etag } = await read(peteInWorld);
  const refusal = await jsonOf(await put(peteInWorld, etag, { layer: 'user', settings: { brightness: 1 } }));
  const malformed = await put(peteInWorld, 'no-quotes', { layer: 'user', settings: { volume: 0.5 } });
  await assertApiError(malformed, 400, 'if_match_invalid');
  for (const method of ['put', 'delete']) {
    const description = doc.paths['/v1/runtime/plugins/{pluginId}/settings']![method]!.description;
    const member = /by JSON Pointer in `([a-z.]+)`/.exec(description)?.[1];
    assert.ok(member, `${method}: names where the pointers are`);
    const at = member.split('.').reduce<unknown>((value, name) => (value as Record<string, unknown> | undefined)?.[name], refusal);
    assert.ok(Array.isArray(at), `${method}: a 422 body carries \`${member}\`: ${JSON.stringify(refusal)}`);
    assert.match(description, /400 if_match_invalid/, `${method}: documents the malformed If-Match`);
  }
});

test.run();
