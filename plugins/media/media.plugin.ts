import type { PluginRelease } from '../plugin-catalog.js';

/**
 * The Media plugin as the registry knows it (media-plugin.md): identity, release and the settings schema `1.0.0`.
 * The one definition of these settings; the Media issue's server side and adapter build on this object.
 */
export const MEDIA_PLUGIN_ID = 'plg_media';

export const mediaPlugin: PluginRelease = {
  pluginId: MEDIA_PLUGIN_ID,
  slug: 'media',
  name: 'Media',
  version: '0.1.0-alpha.29',
  settingsSchema: {
    version: '1.0.0',
    settings: {
      volume: { type: 'number', default: 0.8, minimum: 0, maximum: 1, multipleOf: 0.05, scopes: ['plugin_default', 'user', 'user_environment'] },
      defaultMuted: { type: 'boolean', default: true, scopes: ['plugin_default', 'user', 'user_environment'] },
      // Device ids name the hardware of one browser and mean nothing elsewhere: they live only in the page.
      inputDeviceId: { type: 'string', maxLength: 512, scopes: ['session'] },
      outputDeviceId: { type: 'string', maxLength: 512, scopes: ['session'] },
    },
  },
};
