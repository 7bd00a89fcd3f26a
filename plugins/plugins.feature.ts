import { identityServices } from '../identity/identity.feature.js';
import type { ServerParts, ServerServices } from '../server/server.js';
import { pluginSettingsRoutes } from '../transport/http/routes/plugin-settings.routes.js';
import { pluginInstallationRoutes } from '../transport/ops/plugin-installations.routes.js';
import { PluginInstallations } from './plugin-installations.js';
import { PluginSettings } from './settings/plugin-settings.js';

const installationsOf = new WeakMap<ServerServices, PluginInstallations>();

/** One view of the installations per server, shared by every feature that asks (its cache must be one). */
export function pluginInstallations(services: ServerServices): PluginInstallations {
  let installations = installationsOf.get(services);
  if (!installations) installationsOf.set(services, (installations = new PluginInstallations(services.storage.db, services.clock)));
  return installations;
}

/**
 * Plugins installed per Environment (by operators, until the API has an install operation) and their settings on the
 * Runtime plane. Built on identity: the Environment's owner holds its derived admin role, which writes the
 * `environment` layer.
 */
export const pluginsFeature: ServerParts = {
  build: async (services) => {
    const { storage, clock } = services;
    const { directory } = await identityServices(services);
    const installations = pluginInstallations(services);
    const settings = new PluginSettings(storage.db, clock, async (environmentId) => (await directory.environment(environmentId))?.ownerAccountId);
    return {
      routes: pluginSettingsRoutes({ installations, settings }),
      opsRoutes: pluginInstallationRoutes({ installations }),
    };
  },
};
