import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaEnvironmentConfigV2Schema, type MediaEnvironmentConfigV2 } from '../../plugins/media/media-config.schema.js';
import { checkMediaEnvironmentConfig } from '../../plugins/media/media-policy.check.js';
import { DEFAULT_DIRECT_CALL_POLICY } from '../../media/media.feature.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { enrolFirst } from '../support/identity.js';
import { testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { runRegistryAdmin } from '../support/process.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Installation configuration through the operator listener and `registry-admin`, against the real server: the
 * structural check (and only it), pointers on refusal, the audit event, idempotent re-configuration, reading it back
 * checked against the installed release.
 */
let db: TestDatabase;
let server: TestServer;
let world: TestEnvironment;
let bare: TestEnvironment;
let dir: string;

const config: MediaEnvironmentConfigV2 = {
  spaces: [
    {
      id: 'town_hall',
      policy: {
        mode: 'stage',
        maxParticipants: 150,
        maxSpeakerSeats: 4,
        floorControl: 'moderated',
        raiseHand: 'enabled',
        screenShare: 'owners',
        screenProfile: 'slides',
        guestPolicy: 'allowed',
        encryption: 'transport',
        roleAuthorityUrl: 'https://backend.config-world.example/media/authority',
        reconnectGraceSeconds: 60,
      },
    },
  ],
  directCalls: {
    enabled: true,
    policy: { ...DEFAULT_DIRECT_CALL_POLICY, guestPolicy: 'callee_only', reconnectGraceSeconds: 20 },
  },
};

const admin = (args: string[]) => runRegistryAdmin(server.opsUrl, 'ops-sam', args);

async function file(name: string, content: unknown): Promise<string> {
  const at = path.join(dir, name);
  await writeFile(at, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return at;
}

const configurationUrl = (environmentId: string, pluginId = 'plg_media') => `${server.opsUrl}/registry/environments/${environmentId}/plugins/${pluginId}/configuration`;
const put = (environmentId: string, body: string, pluginId = 'plg_media') =>
  fetch(configurationUrl(environmentId, pluginId), { method: 'PUT', body, headers: { 'content-type': 'application/json', 'x-operator-name': 'ops-sam' } });
const get = (environmentId: string, pluginId = 'plg_media') => fetch(configurationUrl(environmentId, pluginId), { headers: { 'x-operator-name': 'ops-sam' } });

withTestServer(test, (started) => ({ db, server } = started), productParts);
test.before(async () => {
  await enrolFirst(server.url, 'olga');
  world = await testEnvironment(server.opsUrl, 'config-world', 'olga');
  bare = await testEnvironment(server.opsUrl, 'bare-world', 'olga');
  dir = await mkdtemp(path.join(tmpdir(), 'plugin-config-'));
  const installed = await admin(['plugin', 'install', '--environment', world.environmentId, '--plugin', 'plg_media']);
  assert.is(installed.code, 0, installed.stderr);
});

test('an installed but unconfigured Plugin reads as unconfigured; one not installed, or unknown, is 404', async () => {
  const res = await get(world.environmentId);
  assert.is(res.status, 200);
  assert.equal(await jsonOf(res), { environmentId: world.environmentId, pluginId: 'plg_media', version: '0.1.0-alpha.29', state: 'unconfigured' });
  const notInstalled = await get(bare.environmentId);
  assert.is(notInstalled.status, 404);
  assert.is(((await jsonOf(notInstalled)).error as { code: string }).code, 'plugin_not_installed');
  assert.is(((await jsonOf(await get(world.environmentId, 'plg_nothing'))).error as { code: string }).code, 'plugin_not_found');
  const refused = await put(bare.environmentId, JSON.stringify(config));
  assert.is(refused.status, 404);
  assert.is(((await jsonOf(refused)).error as { code: string }).code, 'plugin_not_installed');
});

test('registry-admin plugin configure sets it, audited once; the same document again changes nothing', async () => {
  const done = await admin(['plugin', 'configure', world.environmentId, 'plg_media', await file('media.json', config)]);
  assert.is(done.code, 0, done.stderr);
  assert.equal(JSON.parse(done.stdout), { environmentId: world.environmentId, pluginId: 'plg_media', version: '0.1.0-alpha.29', changed: true, configuration: config });

  // Member order is not meaning: the same document written differently is the same configuration.
  const reordered = { directCalls: config.directCalls, spaces: config.spaces };
  const again = await admin(['plugin', 'configure', world.environmentId, 'plg_media', await file('again.json', reordered)]);
  assert.is((JSON.parse(again.stdout) as { changed: boolean }).changed, false);

  const shown = JSON.parse((await admin(['plugin', 'configuration', world.environmentId, 'plg_media'])).stdout) as Record<string, unknown>;
  assert.equal([shown.state, shown.configuredBy, shown.configuration], ['configured', 'operator:ops-sam', config]);
  assert.ok(!Number.isNaN(Date.parse(shown.configuredAt as string)));

  const audit = JSON.parse((await admin(['audit', 'list', '--target', `environment:${world.environmentId}`])).stdout) as { events: Array<{ action: string; actor: string; data: Record<string, string> }> };
  const events = audit.events.filter((e) => e.action === 'plugin.configure');
  assert.is(events.length, 1, 'one event, for the call that changed it');
  assert.equal([events[0]!.actor, events[0]!.data.pluginId, events[0]!.data.version], ['operator:ops-sam', 'plg_media', '0.1.0-alpha.29']);
  assert.match(events[0]!.data.configurationSha256!, /^[0-9a-f]{64}$/);
});

test('a document that fails the structural schema is refused with 400 and a pointer per problem; nothing changes', async () => {
  const bad = {
    spaces: [{ id: 'Town Hall', policy: { ...config.spaces![0]!.policy, maxParticipants: 151, recording: 'enabled' } }],
    directCalls: { enabled: true, policy: { ...config.directCalls.policy!, maxParticipants: 3 } },
    theme: 'dark',
  };
  const res = await put(world.environmentId, JSON.stringify(bad));
  assert.is(res.status, 400);
  const error = (await jsonOf(res)).error as { code: string; details: Array<{ pointer: string; in: string; code: string }> };
  assert.is(error.code, 'validation_failed');
  assert.equal(error.details.map((d) => d.pointer).sort(), [
    '/directCalls/policy/maxParticipants',
    '/spaces/0/id',
    '/spaces/0/policy/maxParticipants',
    '/spaces/0/policy/recording',
    '/theme',
  ]);
  assert.ok(error.details.every((d) => d.in === 'body'));
  const missing = await put(world.environmentId, JSON.stringify({ spaces: [] }));
  assert.equal(((await jsonOf(missing)).error as { details: Array<{ pointer: string }> }).details.map((d) => d.pointer), ['/directCalls']);
  assert.is((await put(world.environmentId, '[1, 2]')).status, 400, 'a configuration is an object');

  const cli = await admin(['plugin', 'configure', world.environmentId, 'plg_media', await file('bad.json', bad)]);
  assert.is(cli.code, 1);
  assert.match(cli.stderr, /validation_failed/);
  assert.match(cli.stderr, /\/spaces\/0\/policy\/maxParticipants/);
  const after = (await jsonOf(await get(world.environmentId))) as { configuration: unknown };
  assert.equal(after.configuration, config, 'the refused document changed nothing');
});

test('the registry checks structure only: a cross-field violation is stored, and the Media service\'s check finds it', async () => {
  const contradictory = structuredClone(config);
  contradictory.spaces![0]!.policy = { ...contradictory.spaces![0]!.policy, maxParticipants: 3, maxSpeakerSeats: 4 };
  const res = await put(world.environmentId, JSON.stringify(contradictory));
  assert.is(res.status, 200);
  const stored = (await jsonOf(await get(world.environmentId))) as { configuration: unknown };
  const parsed = MediaEnvironmentConfigV2Schema.parse(stored.configuration);
  assert.equal(checkMediaEnvironmentConfig(parsed).map((v) => [v.pointer, v.code]), [
    ['/spaces/0/policy/maxSpeakerSeats', 'speaker_seats_exceed_participants'],
    ['/spaces/0/policy/maxSpeakerSeats', 'stage_without_audience'],
  ]);
  assert.is((await put(world.environmentId, JSON.stringify(config))).status, 200);
});

test('a stored document the installed release no longer accepts reads as invalid, with its problems', async () => {
  // What an older release's schema allowed: the row as a previous server version left it.
  const older = { ...config, directCalls: { enabled: true, ringTimeoutSeconds: 30 } };
  await db.connection.db
    .updateTable('plugin_installations')
    .set({ configuration: JSON.stringify(older) })
    .where('environment_id', '=', world.environmentId)
    .where('plugin_id', '=', 'plg_media')
    .execute();
  const view = (await jsonOf(await get(world.environmentId))) as { state: string; configuration?: unknown; problems: Array<{ pointer: string; code: string }> };
  assert.is(view.state, 'invalid');
  assert.is(view.configuration, undefined, 'an invalid document is not handed out as a configuration');
  assert.equal(view.problems.map((p) => [p.pointer, p.code]), [['/directCalls/ringTimeoutSeconds', 'unrecognized']]);
  const fixed = await admin(['plugin', 'configure', world.environmentId, 'plg_media', await file('fixed.json', config)]);
  assert.is((JSON.parse(fixed.stdout) as { changed: boolean }).changed, true);
});

test('registry-admin refuses wrong operands (exit 2) and a file that is not JSON (exit 1) before calling', async () => {
  const usage = await admin(['plugin', 'configure', world.environmentId, 'plg_media']);
  assert.is(usage.code, 2);
  assert.match(usage.stderr, /plugin configure takes <environmentId> <pluginId> <file.json>/);
  const extra = await admin(['plugin', 'list', 'surplus', '--environment', world.environmentId]);
  assert.is(extra.code, 2);
  const notJson = await admin(['plugin', 'configure', world.environmentId, 'plg_media', await file('broken.json', '{"spaces": [')]);
  assert.is(notJson.code, 1);
  assert.match(notJson.stderr, /broken\.json is not JSON/);
});

test('a configuration body is capped at 256 KiB', async () => {
  const res = await put(world.environmentId, JSON.stringify({ directCalls: { enabled: true }, padding: 'x'.repeat(256 * 1024) }));
  assert.is(res.status, 413);
});

test.run();
