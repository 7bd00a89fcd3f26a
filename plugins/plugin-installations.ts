import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import { writeAudit } from '../identity/audit.js';
import type { Database } from '../storage/database.js';
import { HttpError, validationDetails, type ErrorDetail } from '../transport/http/errors.js';
import { pluginRelease, type PluginConfigurationDocument, type PluginRelease } from './plugin-catalog.js';

export interface PluginInstallation {
  readonly environmentId: string;
  readonly release: PluginRelease;
  readonly installedBy: string;
  readonly installedAt: number;
}

/**
 * An installation's configuration as its Plugin's service reads it. `invalid`: what was stored no longer satisfies the
 * schema of the release now installed (a server upgrade changed it); the service must not run on it.
 */
export type InstallationConfiguration =
  | { readonly state: 'unconfigured' }
  | { readonly state: 'configured'; readonly value: PluginConfigurationDocument; readonly configuredBy: string; readonly configuredAt: number }
  | { readonly state: 'invalid'; readonly details: readonly ErrorDetail[]; readonly configuredBy: string; readonly configuredAt: number };

/** JSON with object keys sorted: jsonb does not keep key order, so equality and digests are taken on this form. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Which Plugins each Environment has installed. Installing is an operator's act (the spec has no install operation
 * yet) and commits with its `plugin.install` audit event; installing again changes and records nothing. Nothing
 * uninstalls, so a positive answer is cached for the life of the process.
 */
export class PluginInstallations {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;
  readonly #installed = new Set<string>();

  constructor(db: Kysely<Database>, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  /** True when this call installed it. The Environment must exist (`environment_not_found`), the Plugin be in the catalog. */
  async install(environmentId: string, pluginId: string, actor: string): Promise<{ release: PluginRelease; changed: boolean }> {
    const release = pluginRelease(pluginId);
    if (!release) throw new HttpError(404, 'plugin_not_found', `the registry carries no Plugin ${pluginId}`, { family: 'catalog' });
    const at = new Date(this.#clock.now());
    const changed = await this.#db.transaction().execute(async (trx) => {
      const environment = await trx.selectFrom('environments').select('id').where('id', '=', environmentId).executeTakeFirst();
      if (!environment) throw new HttpError(404, 'environment_not_found', `no Environment ${environmentId}`, { family: 'catalog' });
      const inserted = await trx
        .insertInto('plugin_installations')
        .values({ environment_id: environmentId, plugin_id: pluginId, installed_by: actor, installed_at: at })
        .onConflict((oc) => oc.columns(['environment_id', 'plugin_id']).doNothing())
        .returning('plugin_id')
        .executeTakeFirst();
      if (!inserted) return false;
      await writeAudit(
        trx,
        { action: 'plugin.install', actor, target: `environment:${environmentId}`, data: { pluginId, version: release.version, settingsSchemaVersion: release.settingsSchema.version } },
        at,
      );
      return true;
    });
    this.#installed.add(`${environmentId} ${pluginId}`);
    return { release, changed };
  }

  /** The release an Environment runs, or undefined when it has not installed the Plugin (or no such Plugin exists). */
  async installed(environmentId: string, pluginId: string): Promise<PluginRelease | undefined> {
    const release = pluginRelease(pluginId);
    if (!release) return undefined;
    const key = `${environmentId} ${pluginId}`;
    if (this.#installed.has(key)) return release;
    const row = await this.#db
      .selectFrom('plugin_installations')
      .select('plugin_id')
      .where('environment_id', '=', environmentId)
      .where('plugin_id', '=', pluginId)
      .executeTakeFirst();
    if (!row) return undefined;
    this.#installed.add(key);
    return release;
  }

  /**
   * Sets an installation's configuration after checking it against the release's structural schema only (400
   * `validation_failed`, with a pointer per problem); stricter rules are the Plugin service's. Commits with its
   * `plugin.configure` audit event, which records a digest rather than the document. The same document again changes
   * and records nothing.
   */
  async configure(environmentId: string, pluginId: string, document: unknown, actor: string): Promise<{ release: PluginRelease; configuration: PluginConfigurationDocument; changed: boolean }> {
    const release = pluginRelease(pluginId);
    if (!release) throw new HttpError(404, 'plugin_not_found', `the registry carries no Plugin ${pluginId}`, { family: 'catalog' });
    const schema = release.configurationSchema;
    if (!schema) throw new HttpError(409, 'plugin_not_configurable', `${pluginId} ${release.version} takes no installation configuration`, { family: 'catalog' });
    const parsed = schema.safeParse(document);
    if (!parsed.success) {
      throw new HttpError(400, 'validation_failed', `the configuration does not satisfy the configuration schema of ${pluginId} ${release.version}`, {
        details: validationDetails(parsed.error, 'body'),
      });
    }
    const configuration = parsed.data;
    const canonical = canonicalJson(configuration);
    const at = new Date(this.#clock.now());
    const changed = await this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('plugin_installations')
        .select('configuration')
        .where('environment_id', '=', environmentId)
        .where('plugin_id', '=', pluginId)
        .forUpdate()
        .executeTakeFirst();
      if (!row) throw new HttpError(404, 'plugin_not_installed', `${environmentId} has not installed ${pluginId}`, { family: 'catalog' });
      if (row.configuration !== null && canonicalJson(row.configuration) === canonical) return false;
      await trx
        .updateTable('plugin_installations')
        .set({ configuration: JSON.stringify(configuration), configured_by: actor, configured_at: at })
        .where('environment_id', '=', environmentId)
        .where('plugin_id', '=', pluginId)
        .execute();
      await writeAudit(
        trx,
        {
          action: 'plugin.configure',
          actor,
          target: `environment:${environmentId}`,
          data: { pluginId, version: release.version, configurationSha256: createHash('sha256').update(canonical).digest('hex') },
        },
        at,
      );
      return true;
    });
    return { release, configuration, changed };
  }

  /**
   * The configuration of an installation, checked against the release installed now; undefined when the Environment
   * has not installed the Plugin. What a Plugin's service (Media) reads before it applies its own stricter rules.
   */
  async configuration(environmentId: string, pluginId: string): Promise<InstallationConfiguration | undefined> {
    const release = pluginRelease(pluginId);
    if (!release) return undefined;
    const row = await this.#db
      .selectFrom('plugin_installations')
      .select(['configuration', 'configured_by', 'configured_at'])
      .where('environment_id', '=', environmentId)
      .where('plugin_id', '=', pluginId)
      .executeTakeFirst();
    if (!row) return undefined;
    if (row.configuration === null || row.configured_by === null || row.configured_at === null) return { state: 'unconfigured' };
    const who = { configuredBy: row.configured_by, configuredAt: row.configured_at.getTime() };
    const parsed = release.configurationSchema?.safeParse(row.configuration);
    if (!parsed) return { state: 'invalid', details: [{ pointer: '', in: 'body', code: 'not_configurable', message: `${pluginId} ${release.version} takes no configuration` }], ...who };
    return parsed.success ? { state: 'configured', value: parsed.data, ...who } : { state: 'invalid', details: validationDetails(parsed.error, 'body'), ...who };
  }

  async list(environmentId: string): Promise<PluginInstallation[]> {
    const rows = await this.#db.selectFrom('plugin_installations').selectAll().where('environment_id', '=', environmentId).orderBy('plugin_id').execute();
    return rows.flatMap((row) => {
      const release = pluginRelease(row.plugin_id);
      return release ? [{ environmentId, release, installedBy: row.installed_by, installedAt: row.installed_at.getTime() }] : [];
    });
  }
}
