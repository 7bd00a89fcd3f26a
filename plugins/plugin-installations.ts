import type { Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import { writeAudit } from '../identity/audit.js';
import type { Database } from '../storage/database.js';
import { HttpError } from '../transport/http/errors.js';
import { pluginRelease, type PluginRelease } from './plugin-catalog.js';

export interface PluginInstallation {
  readonly environmentId: string;
  readonly release: PluginRelease;
  readonly installedBy: string;
  readonly installedAt: number;
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

  async list(environmentId: string): Promise<PluginInstallation[]> {
    const rows = await this.#db.selectFrom('plugin_installations').selectAll().where('environment_id', '=', environmentId).orderBy('plugin_id').execute();
    return rows.flatMap((row) => {
      const release = pluginRelease(row.plugin_id);
      return release ? [{ environmentId, release, installedBy: row.installed_by, installedAt: row.installed_at.getTime() }] : [];
    });
  }
}
