import type * as z from 'zod';
import { mediaPlugin } from './media/media.plugin.js';
import type { SettingsSchema } from './settings/settings-schema.js';

/** A backend component a Runtime may obtain Plugin Grants for (the manifest's `backend` entries). */
export interface PluginBackendComponent {
  readonly id: string;
  readonly grantScopes: readonly string[];
  /** The context a grant carries to the component: validated as given, nothing the schema does not name. */
  readonly context: z.ZodType<Readonly<Record<string, string>>>;
}

/** An installation configuration: always a JSON object, whatever else its Plugin's schema requires. */
export type PluginConfigurationDocument = Readonly<Record<string, unknown>>;

/**
 * The Plugins this registry carries in code, one release each. An Environment that installs a Plugin runs the
 * release listed here: upgrading the server upgrades every installation's settings schema, which is why persisted
 * settings are checked against it again whenever they are read.
 */
export interface PluginRelease {
  /** `plg_<slug>`: stable across releases. */
  readonly pluginId: string;
  readonly slug: string;
  readonly name: string;
  readonly version: string;
  readonly settingsSchema: SettingsSchema;
  /** Platform permissions the release requests; `plugin-grant:request` lets its Runtime code obtain Plugin Grants. */
  readonly platformPermissions: readonly string[];
  readonly backendComponents: readonly PluginBackendComponent[];

  /**
   * The structural schema of the configuration an operator gives an installation (spaces, policies …). The registry
   * checks only this; the Plugin's own service applies any stricter rules. Without one, the Plugin takes none.
   */
  readonly configurationSchema?: z.ZodType<PluginConfigurationDocument>;
}

/**
 * The publisher of the Plugins the registry carries in code: the registry itself. The spec leaves the values open
 * (`<publisher_id>`, `<publisher_handle>`); these name the first party.
 */
export const REGISTRY_PUBLISHER = Object.freeze({ id: 'pub_registry', handle: 'registry' });

export const PLUGIN_ID = /^plg_[a-z0-9][a-z0-9_]{0,59}$/;

const catalog: ReadonlyMap<string, PluginRelease> = new Map([mediaPlugin].map((release) => [release.pluginId, release]));

export function pluginRelease(pluginId: string): PluginRelease | undefined {
  return catalog.get(pluginId);
}

export function pluginReleases(): readonly PluginRelease[] {
  return [...catalog.values()];
}
