import { createHash } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { publisherAuthorityOpenApiText } from '../../media/publisher-authority/publisher-authority.openapi.js';
import { mediaControlAsyncApiText } from '../../media/media.feature.js';
import { mediaEnvironmentConfigJsonSchema, mediaGrantContextJsonSchema, mediaSettingsJsonSchema } from '../../plugins/media/media-config.schema.js';
import { buildMediaManifest, MEDIA_FRONTEND_EXPORTS } from '../../plugins/media/media.manifest.js';
import { PluginManifestSchema, type PluginManifest } from '../../plugins/plugin-manifest.schema.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { redoclyLint } from '../support/redocly.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The Media plugin's manifest and protocol artifacts in the anonymous catalog, against the real server: every value
 * of media-plugin.md, digests that match the bytes served, ETags, and a route table that still lints clean. The
 * control plane's AsyncAPI document is validated in test/media/media-control.test.ts.
 */
let server: TestServer;

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

withTestServer(test, (started) => ({ server } = started), productParts);

async function manifest(): Promise<PluginManifest> {
  const res = await fetch(`${server.url}/v1/catalog/plugins/plg_media/manifest`);
  assert.is(res.status, 200);
  return PluginManifestSchema.parse(await res.json());
}

test('the manifest names the Plugin, its publisher, capabilities and resources exactly as the spec', async () => {
  const m = await manifest();
  assert.equal(
    [m.pluginId, m.slug, m.name, m.version, m.contractVersion, m.category, m.kind, m.runtimeClass],
    ['plg_media', 'media', 'Media', '0.1.0-alpha.29', '0.1.0-alpha.1', 'communication', 'full_stack', 'trusted_library'],
  );
  assert.equal(m.publisher, { id: 'pub_registry', handle: 'registry' });
  assert.equal(m.capabilities, ['media:direct-call', 'media:meeting', 'media:stage', 'media:screen-share']);
  assert.equal(m.frontendAdapters, [
    { id: 'react', runtime: 'react', exportPath: '.', peerDependencies: { react: '>=18' }, semanticPorts: { provides: [], requires: [] }, exports: [...MEDIA_FRONTEND_EXPORTS] },
  ]);
  assert.is(m.frontendAdapters[0]!.exports.length, 26);
  assert.equal(m.backendComponents, [
    {
      id: 'control',
      name: 'Media control plane',
      protocol: 'websocket',
      protocolArtifactId: 'media-v2-data-plane',
      capabilities: ['call:signaling', 'space:membership', 'media:authorization', 'moderation'],
      grantScopes: ['media:connect', 'media:direct-call', 'media:join-space', 'media:request-speak', 'media:publish'],
      context: mediaGrantContextJsonSchema,
    },
  ]);
  assert.equal(m.hostCallbacks.map((c) => [c.id, c.operationId, c.protocolArtifactId, c.target, c.credential, c.timeoutMs, c.maxResponseBytes, c.redirects, c.onFailure]), [
    ['publisher-authority', 'authorizePublisher', 'publisher-authority-api', 'environment_backend', { kind: 'forwarded_plugin_grant', bodyField: 'grant', requiredScope: 'media:publish' }, 2000, 4096, 'error', 'deny'],
  ]);
});

test('permissions, browser requirements, network origins resolved to this server, data, schemas, limits, versioning', async () => {
  const m = await manifest();
  assert.equal(m.platformPermissions, ['identity:read', 'profile:read', 'settings:read', 'settings:write', 'plugin-grant:request']);
  assert.equal(m.browserRequirements.map((r) => [r.permission, r.optional]), [['microphone', true], ['display-capture', true]]);
  assert.match(m.browserRequirements[0]!.requestedWhen, /chooses to speak/);
  assert.match(m.browserRequirements[1]!.requestedWhen, /explicitly starts screen sharing/);
  const host = new URL(server.url).host;
  assert.equal(m.network.origins.map((o) => [o.template, o.scheme, o.origin]), [['{media_url}', 'https', `http://${host}`], ['{rtc_url}', 'wss', `ws://${host}`]]);
  assert.equal(m.data.collected, ['pairwise_plugin_actor', 'authoritative_display_profile', 'environment_and_scope', 'session_membership', 'connection_diagnostics']);
  assert.equal([m.data.sharedWithOthers, m.data.mediaRecorded, m.data.mediaTranscribed, m.data.movementOrPositionCollected], [[], false, false, false]);
  assert.equal(m.installationConfiguration.schema, mediaEnvironmentConfigJsonSchema);
  assert.equal(m.settings, {
    schemaVersion: '1.0.0',
    schema: mediaSettingsJsonSchema,
    scopes: {
      volume: ['plugin_default', 'user', 'user_environment'],
      defaultMuted: ['plugin_default', 'user', 'user_environment'],
      inputDeviceId: ['session'],
      outputDeviceId: ['session'],
    },
  });
  assert.equal(
    [m.limits.maxConcurrentSessions, m.limits.maxParticipantsPerContext, m.limits.maxMessageBytes, m.limits.requestsPerMinute, m.limits.maxSpaces, m.limits.maxSettingDeviceIdLength],
    [1, 150, 16384, 600, 64, 512],
  );
  assert.equal(m.versioning, {
    pluginVersion: '0.1.0-alpha.29',
    contractVersion: '0.1.0-alpha.1',
    compatibleContracts: '^0.1.0-alpha.1',
    compatibleSdk: '^0.1.0-alpha.1',
    settingsSchemaVersion: '1.0.0',
    controlProtocol: 'AsyncAPI 3.0.0',
    publisherAuthority: 'OpenAPI 3.1.0',
    license: 'MIT',
  });
});

test('each protocol artifact is served byte for byte as pinned: media type, sha256, ETag, If-None-Match', async () => {
  const m = await manifest();
  assert.equal(m.protocolArtifacts.map((a) => [a.id, a.kind, a.specificationVersion, a.mediaType]), [
    ['media-v2-data-plane', 'asyncapi', '3.0.0', 'application/vnd.aai.asyncapi+json'],
    ['publisher-authority-api', 'openapi', '3.1.0', 'application/vnd.oai.openapi+json'],
  ]);
  const expected: Record<string, string> = { 'media-v2-data-plane': mediaControlAsyncApiText(server.url), 'publisher-authority-api': publisherAuthorityOpenApiText('0.1.0-alpha.29') };
  for (const artifact of m.protocolArtifacts) {
    assert.is(artifact.url, `${server.url}/v1/catalog/plugins/plg_media/artifacts/${artifact.id}`);
    const res = await fetch(artifact.url);
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-type'), artifact.mediaType);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.is(createHash('sha256').update(bytes).digest('hex'), artifact.sha256, 'the digest is of the exact bytes served');
    assert.is(bytes.toString('utf8'), expected[artifact.id]);
    assert.is(res.headers.get('etag'), `"${artifact.sha256}"`);
    const revalidated = await fetch(artifact.url, { headers: { 'if-none-match': `W/"other", "${artifact.sha256}"` } });
    assert.is(revalidated.status, 304);
    assert.is(await revalidated.text(), '');
    assert.is((await fetch(artifact.url, { headers: { 'if-none-match': '"stale"' } })).status, 200);
  }
  assert.is(m.protocolArtifacts[0]!.sha256, sha256(mediaControlAsyncApiText(server.url)));
});

test('unknown Plugins and artifacts are 404 in the ApiError body', async () => {
  const noArtifact = await fetch(`${server.url}/v1/catalog/plugins/plg_media/artifacts/media-v3`);
  assert.is(noArtifact.status, 404);
  assert.is(((await jsonOf(noArtifact)).error as { code: string }).code, 'artifact_not_found');
  const noPlugin = await fetch(`${server.url}/v1/catalog/plugins/plg_chat/manifest`);
  assert.is(noPlugin.status, 404);
  assert.is(((await jsonOf(noPlugin)).error as { code: string }).code, 'plugin_not_found');
  assert.is((await fetch(`${server.url}/v1/catalog/plugins/media/manifest`)).status, 400, 'a malformed Plugin id');
});

test('behind an https public address the network placeholders resolve to https and wss origins', () => {
  const m = buildMediaManifest({ publicUrl: 'https://registry.example/', artifacts: { 'media-v2-data-plane': '{}', 'publisher-authority-api': '{"openapi":"3.1.0"}' } });
  assert.equal(m.network.origins.map((o) => o.origin), ['https://registry.example', 'wss://registry.example']);
  assert.equal(m.protocolArtifacts.map((a) => [a.url, a.sha256]), [
    ['https://registry.example/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane', sha256('{}')],
    ['https://registry.example/v1/catalog/plugins/plg_media/artifacts/publisher-authority-api', sha256('{"openapi":"3.1.0"}')],
  ]);
});

test('the API description lists the Catalog operations, both artifact media types, and still passes redocly lint', async () => {
  const text = await (await fetch(`${server.url}/v1/openapi.json`)).text();
  const doc = JSON.parse(text) as {
    tags: Array<{ name: string; description: string }>;
    paths: Record<string, Record<string, { operationId: string; security: unknown; responses: Record<string, { content?: Record<string, unknown> }> }>>;
  };
  const artifactOp = doc.paths['/v1/catalog/plugins/{pluginId}/artifacts/{artifactId}']!.get!;
  assert.is(artifactOp.operationId, 'getPluginArtifact');
  assert.equal(artifactOp.security, []);
  assert.equal(Object.keys(artifactOp.responses['200']!.content!), ['application/vnd.aai.asyncapi+json', 'application/vnd.oai.openapi+json']);
  assert.is(doc.paths['/v1/catalog/plugins/{pluginId}/manifest']!.get!.operationId, 'getPluginManifest');
  assert.ok(doc.paths['/registry/environments/{environmentId}/plugins/{pluginId}/configuration'] === undefined, 'operator routes are not in the public description');
  assert.match(doc.tags.find((t) => t.name === 'Catalog')!.description, /Plugin manifests/);
  const report = await redoclyLint(text);
  assert.equal([report.totals.errors, report.totals.warnings], [0, 0], JSON.stringify(report.problems));
});

test.run();
