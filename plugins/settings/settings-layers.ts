import { createHash } from 'node:crypto';
import { leafProblem, pluginDefaults, SETTINGS_LAYERS, type SettingsLayer, type SettingsSchema, type SettingValue, type WritableLayer } from './settings-schema.js';

/**
 * Resolution of a Plugin's settings for one caller: the four layers as delivered, the winning value of every setting,
 * the layer it came from, and the aggregate tag. Pure, so the same function serves reads, the precondition check of
 * writes and the answer after a write.
 */

/** One persisted leaf of one of the caller's layers, as read from storage: its value is not trusted. */
export interface StoredLeaf {
  readonly layer: WritableLayer;
  readonly setting: string;
  readonly value: unknown;
}

export type LayerValues = Readonly<Record<string, SettingValue>>;

export interface ResolvedSettings {
  readonly pluginId: string;
  readonly schemaVersion: string;
  /** Exactly the inputs of resolution: leaves that fail the installed schema are not among them. */
  readonly layers: Readonly<Record<SettingsLayer, LayerValues>>;
  readonly resolved: LayerValues;
  readonly provenance: Readonly<Record<string, SettingsLayer>>;
  /** Strong entity tag (quoted) of this representation: the `ETag` header and the `etag` member. */
  readonly etag: string;
  /** Persisted leaves left out because they no longer satisfy the installed schema (for logs, never delivered). */
  readonly skipped: readonly StoredLeaf[];
}

export function resolveSettings(pluginId: string, schema: SettingsSchema, leaves: readonly StoredLeaf[]): ResolvedSettings {
  const layers: Record<SettingsLayer, Record<string, SettingValue>> = {
    plugin_default: { ...pluginDefaults(schema) },
    environment: {},
    user: {},
    user_environment: {},
  };
  const skipped: StoredLeaf[] = [];
  for (const leaf of leaves) {
    if (leafProblem(schema, leaf.layer, leaf.setting, leaf.value)) skipped.push(leaf);
    else layers[leaf.layer][leaf.setting] = leaf.value as SettingValue;
  }
  const resolved: Record<string, SettingValue> = {};
  const provenance: Record<string, SettingsLayer> = {};
  // SETTINGS_LAYERS is weakest first, so a later layer overwrites: user_environment > user > environment > plugin_default.
  for (const layer of SETTINGS_LAYERS) {
    for (const [name, value] of Object.entries(layers[layer])) {
      resolved[name] = value;
      provenance[name] = layer;
    }
  }
  const sorted = Object.fromEntries(SETTINGS_LAYERS.map((layer) => [layer, sortedValues(layers[layer])])) as Record<SettingsLayer, LayerValues>;
  return {
    pluginId,
    schemaVersion: schema.version,
    layers: sorted,
    resolved: sortedValues(resolved),
    provenance: Object.fromEntries(Object.keys(resolved).sort().map((name) => [name, provenance[name]!])),
    etag: settingsTag(pluginId, schema.version, sorted),
    skipped,
  };
}

/**
 * The aggregate tag: a digest of what the caller is shown (plugin, schema version, every delivered layer in a fixed
 * order), so it changes exactly when the representation does. A leaf that is never delivered does not move it.
 */
function settingsTag(pluginId: string, schemaVersion: string, layers: Readonly<Record<SettingsLayer, LayerValues>>): string {
  const canonical = JSON.stringify([pluginId, schemaVersion, SETTINGS_LAYERS.map((layer) => Object.entries(layers[layer]))]);
  return `"ps1-${createHash('sha256').update(canonical).digest('base64url')}"`;
}

function sortedValues(values: LayerValues): LayerValues {
  return Object.fromEntries(Object.entries(values).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
