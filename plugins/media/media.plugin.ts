import * as z from 'zod';
import type { PluginRelease } from '../plugin-catalog.js';

/**
 * The Media plugin as the registry knows it (media-plugin.md): identity, release and the settings schema `1.0.0`.
 * The one definition of these settings; the Media issue's server side and adapter build on this object.
 */
export const MEDIA_PLUGIN_ID = 'plg_media';
export const MEDIA_CONTROL_COMPONENT = 'control';
export const MEDIA_GRANT_SCOPES = ['media:connect', 'media:direct-call', 'media:join-space', 'media:request-speak', 'media:publish'] as const;
export type MediaGrantScope = (typeof MEDIA_GRANT_SCOPES)[number];

/** The object passed with a connection: exactly one property, `scope`, naming the space or call it is about. */
export const MediaGrantContextSchema = z.strictObject({
  scope: z.string().min(1).max(96).regex(/^[A-Za-z0-9][A-Za-z0-9:_-]{0,95}$/),
});

export const mediaPlugin: PluginRelease = {
  pluginId: MEDIA_PLUGIN_ID,
  slug: 'media',
  name: 'Media',
  version: '0.1.0-alpha.29',
  platformPermissions: ['identity:read', 'profile:read', 'settings:read', 'settings:write', 'plugin-grant:request'],
  backendComponents: [{ id: MEDIA_CONTROL_COMPONENT, grantScopes: MEDIA_GRANT_SCOPES, context: MediaGrantContextSchema }],
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
