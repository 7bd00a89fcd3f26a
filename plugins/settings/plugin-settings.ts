import { sql, type Kysely, type Transaction } from 'kysely';
import type { Clock } from '../../actors/clock.js';
import { KeyedTurns } from '../../runtime/keyed-turns.js';
import type { Database } from '../../storage/database.js';
import { HttpError, pointerToken, type ErrorDetail } from '../../transport/http/errors.js';
import type { PluginRelease } from '../plugin-catalog.js';
import { resolveSettings, type ResolvedSettings, type StoredLeaf } from './settings-layers.js';
import { leafProblem, PROBLEM_ORDER, scopeProblem, type SettingProblem, type WritableLayer } from './settings-schema.js';

/** Whose settings: a person (their account) in one Environment, calling from a Runtime that holds its lease. */
export interface SettingsCaller {
  readonly accountId: string;
  readonly environmentId: string;
  /**
   * Enters the person's lease turn and checks there that the caller's Runtime still holds its lease (throwing 409
   * `runtime_session_superseded`, `runtime_lease_stale`, …); the returned function ends the turn.
   */
  readonly holdFence: () => Promise<() => void>;
}

export interface SettingsWrite {
  readonly layer: WritableLayer;
  /** The leaves to set; every other leaf of the layer stays as it is. */
  readonly settings: Readonly<Record<string, unknown>>;
}

export interface SettingsClear {
  readonly layer: WritableLayer;
  /** Only these leaves; the whole layer when absent. */
  readonly settings?: readonly string[];
}

/** The owner of an Environment (its derived `admin` role), or undefined for an unknown Environment. */
export type EnvironmentOwnerLookup = (environmentId: string) => Promise<string | undefined>;

/**
 * Advisory-lock classes (the two-key form, whose key space no single-key lock shares): one lock per (Plugin,
 * Environment), shared by writers of a person's own layers and exclusive for the `environment` layer, then one
 * exclusive lock per (Plugin, account). Every writer takes them in that order and holds at most one of each, so no
 * two writers wait on each other in a cycle.
 */
/**
 * A person's settings writes of one Plugin under way at once (one at work, the rest waiting their turn): a page has
 * no use for more (one tag, so one of them wins), and each waiting one is a request held open. More answer 429.
 */
export const MAX_QUEUED_WRITERS = 8;

const ENVIRONMENT_LOCK = 0x5e77_0001;
const ACCOUNT_LOCK = 0x5e77_0002;

/**
 * A person's settings of one installed Plugin in one Environment: read (every persisted leaf validated against the
 * installed schema), written and cleared under `If-Match`. A write checks the tag and changes the layer in one
 * transaction that holds every lock the tag depends on, so of two writers holding the same tag exactly one wins.
 */
export class PluginSettings {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;
  readonly #ownerOf: EnvironmentOwnerLookup;
  /**
   * A person's writers of one Plugin's settings take turns here before they take a connection (see `#locked`); at most
   * MAX_QUEUED_WRITERS of them, in their turn or waiting for it.
   */
  readonly #writers = new KeyedTurns();

  constructor(db: Kysely<Database>, clock: Clock, ownerOf: EnvironmentOwnerLookup) {
    this.#db = db;
    this.#clock = clock;
    this.#ownerOf = ownerOf;
  }

  async read(caller: SettingsCaller, release: PluginRelease): Promise<ResolvedSettings> {
    return resolveSettings(release.pluginId, release.settingsSchema, await loadLeaves(this.#db, caller, release.pluginId));
  }

  /** Sets the named leaves of one layer when `expectedTags` holds the current tag; answers the settings after it. */
  async write(caller: SettingsCaller, release: PluginRelease, write: SettingsWrite, expectedTags: readonly string[]): Promise<ResolvedSettings> {
    const schema = release.settingsSchema;
    await this.#mayWrite(caller, write.layer);
    refuse(
      Object.entries(write.settings).map(([name, value]) => [name, leafProblem(schema, write.layer, name, value)]),
      (name) => ({ in: 'body', pointer: `/settings/${pointerToken(name)}` }),
    );
    return this.#locked(caller, release, write.layer, expectedTags, async (trx, leaves) => {
      const at = new Date(this.#clock.now());
      const owner = ownerColumns(caller, write.layer);
      await trx
        .insertInto('plugin_settings')
        .values(
          Object.entries(write.settings).map(([setting, value]) => ({
            plugin_id: release.pluginId,
            layer: write.layer,
            ...owner,
            setting,
            value: JSON.stringify(value),
            updated_at: at,
          })),
        )
        .onConflict((oc) =>
          oc.columns(['plugin_id', 'environment_id', 'account_id', 'setting']).doUpdateSet((eb) => ({ value: eb.ref('excluded.value'), updated_at: eb.ref('excluded.updated_at') })),
        )
        .execute();
      const written = new Set(Object.keys(write.settings));
      const kept = leaves.filter((leaf) => leaf.layer !== write.layer || !written.has(leaf.setting));
      const added = Object.entries(write.settings).map(([setting, value]) => ({ layer: write.layer, setting, value }));
      return resolveSettings(release.pluginId, schema, [...kept, ...added]);
    });
  }

  /**
   * Removes a layer's leaves (or the named ones) when `expectedTags` holds the current tag. `changed` is false when
   * nothing delivered was there: leaves that fail the schema are removed too, but they were never part of the answer.
   */
  async clear(
    caller: SettingsCaller,
    release: PluginRelease,
    clear: SettingsClear,
    expectedTags: readonly string[],
  ): Promise<{ readonly changed: boolean; readonly settings: ResolvedSettings }> {
    const schema = release.settingsSchema;
    await this.#mayWrite(caller, clear.layer);
    const named = clear.settings === undefined ? undefined : new Set(clear.settings);
    if (clear.settings) {
      refuse(
        clear.settings.map((name) => [name, scopeProblem(schema, clear.layer, name)]),
        (_, index) => ({ in: 'query', pointer: `/setting/${index}` }),
      );
    }
    return this.#locked(caller, release, clear.layer, expectedTags, async (trx, leaves, current) => {
      const owner = ownerColumns(caller, clear.layer);
      let statement = trx
        .deleteFrom('plugin_settings')
        .where('plugin_id', '=', release.pluginId)
        .where('environment_id', '=', owner.environment_id)
        .where('account_id', '=', owner.account_id);
      if (named) statement = statement.where('setting', 'in', [...named]);
      await statement.execute();
      const delivered = Object.keys(current.layers[clear.layer]);
      const changed = named ? delivered.some((name) => named.has(name)) : delivered.length > 0;
      if (!changed) return { changed, settings: current };
      const kept = leaves.filter((leaf) => leaf.layer !== clear.layer || (named !== undefined && !named.has(leaf.setting)));
      return { changed, settings: resolveSettings(release.pluginId, schema, kept) };
    });
  }

  /** `user` and `user_environment` belong to the caller; `environment` only to the Environment's owner (its admin). */
  async #mayWrite(caller: SettingsCaller, layer: WritableLayer): Promise<void> {
    if (layer !== 'environment') return;
    if ((await this.#ownerOf(caller.environmentId)) !== caller.accountId) {
      throw new HttpError(403, 'environment_admin_required', 'only the admin of this Environment (its owner) may change its settings layer', { family: 'account_policy' });
    }
  }

  /**
   * Runs `change` holding the locks of the caller's aggregate and the caller's lease turn, after checking that the
   * tag is still current.
   */
  async #locked<T>(
    caller: SettingsCaller,
    release: PluginRelease,
    layer: WritableLayer,
    expectedTags: readonly string[],
    change: (trx: Transaction<Database>, leaves: readonly StoredLeaf[], current: ResolvedSettings) => Promise<T>,
  ): Promise<T> {
    // One writer per person and Plugin holds a connection at a time (in this process): the others would only queue on
    // the person's advisory lock, each holding a connection of the shared pool meanwhile, and a burst of one person's
    // writes could take the whole pool from everyone, their own activation included.
    const key = `${release.pluginId} ${caller.accountId}`;
    if (this.#writers.holders(key) >= MAX_QUEUED_WRITERS) {
      throw new HttpError(429, 'rate_limited', `${MAX_QUEUED_WRITERS} settings writes of this person are already under way; retry once they are done`, {
        family: 'account_policy',
        headers: { 'retry-after': '1' },
      });
    }
    const entering = this.#writers.enter(key);
    let leaveWriters: (() => void) | undefined;
    // The lease turn is entered once the connection and the locks are held, and left after the commit: the fence holds
    // from its check to the commit, and an activation of the person waits only for this write's last statements, not
    // for its waits on the pool or the locks.
    let leaveTurn: (() => void) | undefined;
    try {
      leaveWriters = await entering;
      return await this.#db.transaction().execute(async (trx) => {
        const environmentLock = layer === 'environment' ? sql`pg_advisory_xact_lock` : sql`pg_advisory_xact_lock_shared`;
        await sql`SELECT ${environmentLock}(${ENVIRONMENT_LOCK}::int4, hashtext(${`${release.pluginId} ${caller.environmentId}`}))`.execute(trx);
        await sql`SELECT pg_advisory_xact_lock(${ACCOUNT_LOCK}::int4, hashtext(${`${release.pluginId} ${caller.accountId}`}))`.execute(trx);
        leaveTurn = await caller.holdFence();
        const leaves = await loadLeaves(trx, caller, release.pluginId);
        const current = resolveSettings(release.pluginId, release.settingsSchema, leaves);
        if (!expectedTags.includes(current.etag)) {
          throw new HttpError(412, 'settings_tag_mismatch', 'the settings changed since this tag was read; read them again and retry', {
            headers: { etag: current.etag },
          });
        }
        return change(trx, leaves, current);
      });
    } finally {
      leaveTurn?.();
      leaveWriters?.();
    }
  }
}

/** Every persisted leaf of the caller's three layers. */
async function loadLeaves(db: Kysely<Database> | Transaction<Database>, caller: SettingsCaller, pluginId: string): Promise<StoredLeaf[]> {
  const rows = await db
    .selectFrom('plugin_settings')
    .select(['layer', 'setting', 'value'])
    .where('plugin_id', '=', pluginId)
    .where((eb) =>
      eb.or([
        eb.and([eb('environment_id', '=', caller.environmentId), eb('account_id', '=', '')]),
        eb.and([eb('environment_id', '=', ''), eb('account_id', '=', caller.accountId)]),
        eb.and([eb('environment_id', '=', caller.environmentId), eb('account_id', '=', caller.accountId)]),
      ]),
    )
    .orderBy('setting')
    .execute();
  return rows.map((row) => ({ layer: row.layer, setting: row.setting, value: row.value }));
}

/** Whom a layer's rows belong to (migration 0006: '' where the layer is not scoped by it). */
function ownerColumns(caller: SettingsCaller, layer: WritableLayer): { environment_id: string; account_id: string } {
  switch (layer) {
    case 'environment':
      return { environment_id: caller.environmentId, account_id: '' };
    case 'user':
      return { environment_id: '', account_id: caller.accountId };
    case 'user_environment':
      return { environment_id: caller.environmentId, account_id: caller.accountId };
  }
}

/**
 * 422 naming every refused setting by JSON Pointer (`where` says into which request part); the code is that of the
 * first refusal in PROBLEM_ORDER, so a client can branch on it and still read every detail.
 */
function refuse(
  checked: ReadonlyArray<readonly [string, SettingProblem | undefined]>,
  where: (name: string, index: number) => Pick<ErrorDetail, 'in' | 'pointer'>,
): void {
  const problems = checked.flatMap(([name, problem], index) => (problem ? [{ name, problem, index }] : []));
  if (problems.length === 0) return;
  const first = PROBLEM_ORDER.find((code) => problems.some((p) => p.problem.code === code))!;
  const details: ErrorDetail[] = problems.map(({ name, problem, index }) => ({ ...where(name, index), code: problem.code, message: problem.message }));
  const message = problems.length === 1 ? `${problems[0]!.name}: ${problems[0]!.problem.message}` : `${problems.length} settings were refused; see errors`;
  throw new HttpError(422, first, message, { details });
}
