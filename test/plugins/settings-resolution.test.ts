import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mediaPlugin } from '../../plugins/media/media.plugin.js';
import { resolveSettings, type StoredLeaf } from '../../plugins/settings/settings-layers.js';
import { leafProblem, scopeProblem } from '../../plugins/settings/settings-schema.js';

/** The pure part of Plugin settings: the Media schema's rules, resolution and the aggregate tag. */
const schema = mediaPlugin.settingsSchema;
const resolve = (leaves: StoredLeaf[]) => resolveSettings(mediaPlugin.pluginId, schema, leaves);

test('Media 1.0.0: each setting only at its scopes; session settings never at a stored layer', () => {
  assert.is(scopeProblem(schema, 'environment', 'volume')?.code, 'setting_scope_not_allowed');
  assert.is(scopeProblem(schema, 'environment', 'defaultMuted')?.code, 'setting_scope_not_allowed');
  for (const layer of ['environment', 'user', 'user_environment'] as const) {
    assert.is(scopeProblem(schema, layer, 'inputDeviceId')?.code, 'setting_session_scoped');
    assert.is(scopeProblem(schema, layer, 'outputDeviceId')?.code, 'setting_session_scoped');
    assert.is(scopeProblem(schema, layer, 'brightness')?.code, 'setting_unknown');
    assert.is(scopeProblem(schema, layer, 'toString')?.code, 'setting_unknown', 'no inherited member counts as a setting');
  }
  assert.is(scopeProblem(schema, 'user', 'volume'), undefined);
  assert.is(scopeProblem(schema, 'user_environment', 'defaultMuted'), undefined);
});

test('Media 1.0.0 values: volume 0 to 1 in steps of 0.05 (decimal steps survive binary floating point), defaultMuted boolean', () => {
  for (const ok of [0, 0.05, 0.35, 0.7, 0.95, 1]) assert.is(leafProblem(schema, 'user', 'volume', ok), undefined, String(ok));
  for (const bad of [-0.05, 1.05, 0.33, 0.051, Number.NaN, '0.5', true, null]) {
    assert.is(leafProblem(schema, 'user', 'volume', bad)?.code, 'setting_value_invalid', String(bad));
  }
  assert.is(leafProblem(schema, 'user', 'defaultMuted', false), undefined);
  assert.is(leafProblem(schema, 'user', 'defaultMuted', 'false')?.code, 'setting_value_invalid');
});

test('resolution: user_environment over user over environment over plugin_default, provenance per leaf, inputs exactly the layers', () => {
  const resolved = resolve([
    { layer: 'user', setting: 'volume', value: 0.5 },
    { layer: 'user_environment', setting: 'defaultMuted', value: false },
  ]);
  assert.equal(resolved.layers, { plugin_default: { defaultMuted: true, volume: 0.8 }, environment: {}, user: { volume: 0.5 }, user_environment: { defaultMuted: false } });
  assert.equal(resolved.resolved, { defaultMuted: false, volume: 0.5 });
  assert.equal(resolved.provenance, { defaultMuted: 'user_environment', volume: 'user' });
  const nothing = resolve([]);
  assert.equal(nothing.resolved, { defaultMuted: true, volume: 0.8 });
  assert.equal(nothing.provenance, { defaultMuted: 'plugin_default', volume: 'plugin_default' });
});

test('persisted leaves that fail the installed schema are skipped: unknown, wrong type, out of bounds, a scope no longer allowed, session', () => {
  const bad: StoredLeaf[] = [
    { layer: 'user', setting: 'brightness', value: 1 },
    { layer: 'user', setting: 'volume', value: 'loud' },
    { layer: 'user_environment', setting: 'volume', value: 1.5 },
    { layer: 'environment', setting: 'volume', value: 0.2 },
    { layer: 'user', setting: 'inputDeviceId', value: 'mic-1' },
  ];
  const resolved = resolve([...bad, { layer: 'user', setting: 'defaultMuted', value: false }]);
  assert.equal(resolved.skipped, bad);
  assert.equal(resolved.layers.environment, {});
  assert.equal(resolved.layers.user, { defaultMuted: false });
  assert.equal(resolved.resolved, { defaultMuted: false, volume: 0.8 });
  assert.is(resolved.etag, resolve([{ layer: 'user', setting: 'defaultMuted', value: false }]).etag, 'a leaf never delivered does not move the tag');
});

test('the tag is a strong quoted tag of what is delivered: same layers, same tag; any delivered change, another', () => {
  const a = resolve([{ layer: 'user', setting: 'volume', value: 0.5 }]);
  assert.match(a.etag, /^"ps1-[A-Za-z0-9_-]{43}"$/);
  assert.is(resolve([{ layer: 'user', setting: 'volume', value: 0.5 }]).etag, a.etag);
  assert.is.not(resolve([{ layer: 'user_environment', setting: 'volume', value: 0.5 }]).etag, a.etag, 'the same value in another layer is another representation');
  assert.is.not(resolve([{ layer: 'user', setting: 'volume', value: 0.55 }]).etag, a.etag);
  assert.is.not(resolveSettings(mediaPlugin.pluginId, { ...schema, version: '1.0.1' }, [{ layer: 'user', setting: 'volume', value: 0.5 }]).etag, a.etag, 'the schema version is part of the tag');
});

test.run();
