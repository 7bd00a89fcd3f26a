import * as z from 'zod';
import type { SettingDefinition, SettingsSchema } from './settings-schema.js';
import { toJsonSchema, type JsonSchema } from '../json-schema.js';

function settingSchema(definition: SettingDefinition): z.ZodType {
  switch (definition.type) {
    case 'number': {
      let schema = z.number().min(definition.minimum).max(definition.maximum);
      if (definition.multipleOf !== undefined) schema = schema.multipleOf(definition.multipleOf);
      return definition.default === undefined ? schema.optional() : schema.default(definition.default);
    }
    case 'boolean':
      return definition.default === undefined ? z.boolean().optional() : z.boolean().default(definition.default);
    case 'string': {
      const schema = z.string().max(definition.maxLength);
      return definition.default === undefined ? schema.optional() : schema.default(definition.default);
    }
  }
}

/**
 * A settings schema as a JSON Schema (draft 2020-12) for a manifest: an object of optional settings with their types,
 * bounds and defaults, and no other properties. Derived from the one definition the registry validates with, so the
 * published description cannot drift from the checks. Scopes are not JSON Schema: the manifest lists them beside it.
 */
export function settingsJsonSchema(schema: SettingsSchema): JsonSchema {
  const shape = Object.fromEntries(Object.entries(schema.settings).map(([name, definition]) => [name, settingSchema(definition)]));
  return toJsonSchema(z.strictObject(shape));
}
