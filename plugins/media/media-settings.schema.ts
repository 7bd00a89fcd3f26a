import type { SettingsSchema } from '../settings/settings-schema.js';

/**
 * The Media plugin's settings schema `1.0.0` (media-plugin.md, "Settings"): the one definition of these settings. The
 * registry validates with it, and the manifest's JSON Schema is generated from it.
 */
export const mediaSettingsSchema: SettingsSchema = {
  version: '1.0.0',
  settings: {
    volume: { type: 'number', default: 0.8, minimum: 0, maximum: 1, multipleOf: 0.05, scopes: ['plugin_default', 'user', 'user_environment'] },
    defaultMuted: { type: 'boolean', default: true, scopes: ['plugin_default', 'user', 'user_environment'] },
    // Device ids name the hardware of one browser and mean nothing elsewhere: they live only in the page.
    inputDeviceId: { type: 'string', maxLength: 512, scopes: ['session'] },
    outputDeviceId: { type: 'string', maxLength: 512, scopes: ['session'] },
  },
};
