import type { PluginRelease } from '../plugin-catalog.js';
import { MediaEnvironmentConfigV2Schema, MediaGrantContextSchema } from './media-config.schema.js';
import { mediaSettingsSchema } from './media-settings.schema.js';

/**
 * The Media plugin as the registry knows it (media-plugin.md): identity, release, the settings schema `1.0.0` and the
 * structural schema of its installation configuration. The Media issue's server side and adapter build on this object.
 */
export const MEDIA_PLUGIN_ID = 'plg_media';
export const MEDIA_CONTROL_COMPONENT = 'control';
export const MEDIA_GRANT_SCOPES = ['media:connect', 'media:direct-call', 'media:join-space', 'media:request-speak', 'media:publish'] as const;
export type MediaGrantScope = (typeof MEDIA_GRANT_SCOPES)[number];

export const mediaPlugin: PluginRelease = {
  pluginId: MEDIA_PLUGIN_ID,
  slug: 'media',
  name: 'Media',
  version: '0.1.0-alpha.29',
  platformPermissions: ['identity:read', 'profile:read', 'settings:read', 'settings:write', 'plugin-grant:request'],
  backendComponents: [{ id: MEDIA_CONTROL_COMPONENT, grantScopes: MEDIA_GRANT_SCOPES, context: MediaGrantContextSchema }],
  settingsSchema: mediaSettingsSchema,
  configurationSchema: MediaEnvironmentConfigV2Schema,
};
