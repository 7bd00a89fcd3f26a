/**
 * A Plugin's settings schema: a flat object of named settings, each with a type, bounds, an optional default and the
 * scopes at which it may be set. Pure: the registry validates every write against it and every persisted leaf again
 * before delivering it, because the installed schema may have changed since the leaf was written.
 */
import * as z from 'zod';

/** The layers a resolved setting can come from, weakest first. */
export const SETTINGS_LAYERS = ['plugin_default', 'environment', 'user', 'user_environment'] as const;
export type SettingsLayer = (typeof SETTINGS_LAYERS)[number];

/** The layers a Runtime caller may write: `plugin_default` comes from the schema itself. */
export const WRITABLE_LAYERS = ['environment', 'user', 'user_environment'] as const;
export type WritableLayer = (typeof WRITABLE_LAYERS)[number];

/** `session` settings live only in the page that set them: the registry never persists them. */
export type SettingScope = SettingsLayer | 'session';

export type SettingValue = number | boolean | string;

interface Scoped {
  readonly scopes: readonly SettingScope[];
}

export type SettingDefinition =
  | (Scoped & {
      readonly type: 'number';
      readonly default?: number;
      readonly minimum: number;
      readonly maximum: number;
      readonly multipleOf?: number;
    })
  | (Scoped & { readonly type: 'boolean'; readonly default?: boolean })
  | (Scoped & { readonly type: 'string'; readonly default?: string; readonly maxLength: number });

export interface SettingsSchema {
  /** Semantic version of the schema (`1.0.0`): part of every settings tag, so a schema change changes every tag. */
  readonly version: string;
  readonly settings: Readonly<Record<string, SettingDefinition>>;
}

/** Why a setting cannot be written, or a persisted leaf cannot be delivered. */
export type SettingProblem =
  | { readonly code: 'setting_unknown'; readonly message: string }
  | { readonly code: 'setting_session_scoped'; readonly message: string }
  | { readonly code: 'setting_scope_not_allowed'; readonly message: string }
  | { readonly code: 'setting_value_invalid'; readonly message: string };

/** When several settings of one request are refused, the response's code is that of the first in this order. */
export const PROBLEM_ORDER: readonly SettingProblem['code'][] = ['setting_unknown', 'setting_session_scoped', 'setting_scope_not_allowed', 'setting_value_invalid'];


const grids = new Map<number, z.ZodNumber>();

/**
 * Whether `value` is a whole number of `step`s, decided as the schema published to Plugins decides it (zod's
 * decimal-aware `multipleOf`: 0.35 is on the 0.05 grid although 0.35 / 0.05 is 6.999999999999999 in binary floating
 * point, and 0.50000000001 is not), so the registry never stores or delivers a value that schema refuses; and
 * stricter than it only where its tolerance is wrong (a value that is not zero yet less than half a step).
 */
function onGrid(step: number, value: number): boolean {
  let grid = grids.get(step);
  if (!grid) grids.set(step, (grid = z.number().multipleOf(step)));
  // zod's tolerance is absolute near zero (it admits 1e-20 as a multiple of 0.05): none of zero steps is zero itself.
  return grid.safeParse(value).success && (value === 0 || Math.round(value / step) !== 0);
}

export function definitionOf(schema: SettingsSchema, name: string): SettingDefinition | undefined {
  return Object.hasOwn(schema.settings, name) ? schema.settings[name] : undefined;
}

/** Whether `name` may be set at `layer` at all (whatever the value): known, not session-only, allowed there. */
export function scopeProblem(schema: SettingsSchema, layer: WritableLayer, name: string): SettingProblem | undefined {
  const definition = definitionOf(schema, name);
  if (!definition) return { code: 'setting_unknown', message: `settings schema ${schema.version} has no setting ${name}` };
  if (!definition.scopes.includes(layer)) {
    if (definition.scopes.length === 1 && definition.scopes[0] === 'session') {
      return { code: 'setting_session_scoped', message: `${name} is a session setting: it lives only in the page and is never stored` };
    }
    const allowed = definition.scopes.filter((s) => s !== 'plugin_default').join(', ');
    return { code: 'setting_scope_not_allowed', message: `${name} cannot be set at ${layer}; allowed: ${allowed}` };
  }
  return undefined;
}

/** Whether `value` satisfies the definition: its type and bounds. */
export function valueProblem(definition: SettingDefinition, value: unknown): SettingProblem | undefined {
  const invalid = (message: string): SettingProblem => ({ code: 'setting_value_invalid', message });
  switch (definition.type) {
    case 'number': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return invalid('must be a number');
      if (value < definition.minimum || value > definition.maximum) return invalid(`must be between ${definition.minimum} and ${definition.maximum}`);
      if (definition.multipleOf !== undefined && !onGrid(definition.multipleOf, value)) return invalid(`must be a multiple of ${definition.multipleOf}`);
      return undefined;
    }
    case 'boolean':
      return typeof value === 'boolean' ? undefined : invalid('must be a boolean');
    case 'string':
      if (typeof value !== 'string') return invalid('must be a string');
      return value.length > definition.maxLength ? invalid(`must be at most ${definition.maxLength} characters`) : undefined;
  }
}

/** Whether a leaf may be written, or delivered from storage: allowed at that layer, and a valid value. */
export function leafProblem(schema: SettingsSchema, layer: WritableLayer, name: string, value: unknown): SettingProblem | undefined {
  return scopeProblem(schema, layer, name) ?? valueProblem(schema.settings[name]!, value);
}

/** The `plugin_default` layer: every default of a setting that the schema allows at `plugin_default`. */
export function pluginDefaults(schema: SettingsSchema): Readonly<Record<string, SettingValue>> {
  const defaults: Record<string, SettingValue> = {};
  for (const [name, definition] of Object.entries(schema.settings)) {
    if (definition.default !== undefined && definition.scopes.includes('plugin_default')) defaults[name] = definition.default;
  }
  return defaults;
}
