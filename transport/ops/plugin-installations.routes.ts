import * as z from 'zod';
import { ENVIRONMENT_ID } from '../../identity/environments.js';
import { PLUGIN_ID } from '../../plugins/plugin-catalog.js';
import type { PluginInstallations } from '../../plugins/plugin-installations.js';
import { apiSchema } from '../http/api-schemas.js';
import { defineRoute, type AnyRoute } from '../http/route.js';
import { operatorOf } from './registry-admin.routes.js';

const InstalledPlugin = z.object({
  pluginId: z.string(),
  version: z.string(),
  settingsSchemaVersion: z.string(),
  installedBy: z.string(),
  installedAt: z.string(),
});

const InstallPluginResponse = apiSchema(
  'OpsInstallPluginResponse',
  z.object({ environmentId: z.string(), pluginId: z.string(), version: z.string(), changed: z.boolean().describe('False when it was already installed.') }),
);

const InstalledPluginList = apiSchema('OpsInstalledPluginList', z.object({ environmentId: z.string(), plugins: z.array(InstalledPlugin) }));

const EnvironmentParams = z.strictObject({ environmentId: z.string().regex(ENVIRONMENT_ID) });

/**
 * Plugin installation for operators (`registry-admin plugin install|list`): the spec has no install operation yet.
 * Installing commits with its `plugin.install` audit event, actor `operator:<X-Operator-Name>`.
 */
export function pluginInstallationRoutes(deps: { installations: PluginInstallations }): AnyRoute[] {
  const common = { tags: ['Operations'], credential: 'operator', errorFormat: 'api' } as const;
  return [
    defineRoute({
      ...common,
      operationId: 'opsInstallPlugin',
      method: 'put',
      path: '/registry/environments/{environmentId}/plugins/{pluginId}',
      summary: 'Install a Plugin of the catalog in an Environment',
      params: EnvironmentParams.extend({ pluginId: z.string().regex(PLUGIN_ID) }),
      errors: [404],
      responses: { 200: { description: 'The Plugin is installed.', schema: InstallPluginResponse } },
      handler: async ({ params, headers }) => {
        const actor = operatorOf(headers);
        const { release, changed } = await deps.installations.install(params.environmentId, params.pluginId, actor);
        return { status: 200, body: { environmentId: params.environmentId, pluginId: release.pluginId, version: release.version, changed } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsListInstalledPlugins',
      method: 'get',
      path: '/registry/environments/{environmentId}/plugins',
      summary: 'Plugins installed in an Environment',
      params: EnvironmentParams,
      responses: { 200: { description: 'Installed Plugins.', schema: InstalledPluginList } },
      handler: async ({ params }) => {
        const installed = await deps.installations.list(params.environmentId);
        return {
          status: 200,
          body: {
            environmentId: params.environmentId,
            plugins: installed.map((i) => ({
              pluginId: i.release.pluginId,
              version: i.release.version,
              settingsSchemaVersion: i.release.settingsSchema.version,
              installedBy: i.installedBy,
              installedAt: new Date(i.installedAt).toISOString(),
            })),
          },
        };
      },
    }),
  ];
}
