import * as z from 'zod';
import { ENVIRONMENT_ID } from '../../identity/environments.js';
import { PLUGIN_ID, pluginRelease } from '../../plugins/plugin-catalog.js';
import type { PluginInstallations } from '../../plugins/plugin-installations.js';
import { apiSchema, ErrorDetailSchema } from '../http/api-schemas.js';
import { HttpError } from '../http/errors.js';
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
const InstallationParams = EnvironmentParams.extend({ pluginId: z.string().regex(PLUGIN_ID) });

const PluginConfiguration = apiSchema(
  'OpsPluginConfiguration',
  // A record drops a `__proto__` member unseen, and the Plugin's strict schema would then never be asked about it: it is
  // refused here as the unknown member it is (deeper ones the Plugin's schema refuses itself).
  z.preprocess((value, ctx) => {
    if (typeof value === 'object' && value !== null && Object.hasOwn(value, '__proto__')) {
      ctx.addIssue({ code: 'unrecognized_keys', keys: ['__proto__'], path: [], input: value as Record<string, unknown> });
    }
    return value;
  }, z.record(z.string(), z.unknown())),
  'An installation configuration: the document the Plugin\'s manifest describes (`installationConfiguration.schema`).',
);

const ConfigurePluginResponse = apiSchema(
  'OpsConfigurePluginResponse',
  z.object({
    environmentId: z.string(),
    pluginId: z.string(),
    version: z.string(),
    changed: z.boolean().describe('False when the installation already had this configuration.'),
    configuration: PluginConfiguration,
  }),
);

const PluginConfigurationView = apiSchema(
  'OpsPluginConfigurationView',
  z.object({
    environmentId: z.string(),
    pluginId: z.string(),
    version: z.string(),
    state: z.enum(['unconfigured', 'configured', 'invalid']).describe('`invalid`: the stored document no longer satisfies the installed release\'s schema.'),
    configuration: PluginConfiguration.optional(),
    problems: z.array(ErrorDetailSchema).optional().describe('Why an `invalid` configuration fails the schema now.'),
    configuredBy: z.string().optional(),
    configuredAt: z.string().optional(),
  }),
);

/** 64 spaces whose policies each carry a 2048-character callback address fit with room to spare. */
const CONFIGURATION_MAX_BYTES = 256 * 1024;

/**
 * Plugin installation and configuration for operators (`registry-admin plugin install|list|configure|configuration`):
 * the spec has no install operation yet. Each change commits with its audit event (`plugin.install`,
 * `plugin.configure`), actor `operator:<X-Operator-Name>`.
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
      params: InstallationParams,
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
      operationId: 'opsConfigurePlugin',
      method: 'put',
      path: '/registry/environments/{environmentId}/plugins/{pluginId}/configuration',
      summary: 'Set the configuration of an installed Plugin',
      description:
        'Replaces the installation configuration after checking it against the structural schema of the installed ' +
        'release only; the Plugin\'s service applies its stricter cross-field rules when it reads it. A document that ' +
        'fails is refused with `400 validation_failed` and one detail (a JSON Pointer into the body) per problem. ' +
        'Audited as `plugin.configure`; setting the same document again changes and records nothing.',
      params: InstallationParams,
      body: PluginConfiguration,
      maxBodyBytes: CONFIGURATION_MAX_BYTES,
      errors: [404, 409],
      responses: { 200: { description: 'The configuration is set.', schema: ConfigurePluginResponse } },
      handler: async ({ params, headers, body }) => {
        const { release, configuration, changed } = await deps.installations.configure(params.environmentId, params.pluginId, body, operatorOf(headers));
        return {
          status: 200,
          body: { environmentId: params.environmentId, pluginId: release.pluginId, version: release.version, changed, configuration },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'opsGetPluginConfiguration',
      method: 'get',
      path: '/registry/environments/{environmentId}/plugins/{pluginId}/configuration',
      summary: 'The configuration of an installed Plugin',
      params: InstallationParams,
      errors: [404],
      responses: { 200: { description: 'The configuration, checked against the installed release.', schema: PluginConfigurationView } },
      handler: async ({ params }) => {
        const release = pluginRelease(params.pluginId);
        if (!release) throw new HttpError(404, 'plugin_not_found', `the registry carries no Plugin ${params.pluginId}`, { family: 'catalog' });
        const found = await deps.installations.configuration(params.environmentId, params.pluginId);
        if (!found) throw new HttpError(404, 'plugin_not_installed', `${params.environmentId} has not installed ${params.pluginId}`, { family: 'catalog' });
        const head = { environmentId: params.environmentId, pluginId: release.pluginId, version: release.version };
        switch (found.state) {
          case 'unconfigured':
            return { status: 200, body: { ...head, state: found.state } };
          case 'configured':
            return {
              status: 200,
              body: { ...head, state: found.state, configuration: found.value, configuredBy: found.configuredBy, configuredAt: new Date(found.configuredAt).toISOString() },
            };
          case 'invalid':
            return { status: 200, body: { ...head, state: found.state, problems: [...found.details], configuredBy: found.configuredBy, configuredAt: new Date(found.configuredAt).toISOString() } };
        }
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
