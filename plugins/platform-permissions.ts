import { HttpError } from '../transport/http/errors.js';
import type { PluginRelease } from './plugin-catalog.js';

/** What a release's Runtime code may do with the registry's Plugin settings (media-plugin.md, platform permissions). */
export const SETTINGS_READ_PERMISSION = 'settings:read';
export const SETTINGS_WRITE_PERMISSION = 'settings:write';

/**
 * Refuses what `release` did not request in its manifest: an installation grants a Plugin the permissions it asked
 * for and no others. One code for every permission, so a page learns the same thing whichever it lacks.
 */
export function requirePlatformPermission(release: PluginRelease, permission: string): void {
  if (!release.platformPermissions.includes(permission)) {
    throw new HttpError(403, 'plugin_permission_not_requested', `${release.pluginId} does not request the platform permission ${permission}`, { family: 'catalog' });
  }
}
