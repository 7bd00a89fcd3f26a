import type { Logger } from 'pino';
import * as z from 'zod';
import { PLUGIN_ID, type PluginRelease } from '../../../plugins/plugin-catalog.js';
import { requirePlatformPermission, SETTINGS_READ_PERMISSION, SETTINGS_WRITE_PERMISSION } from '../../../plugins/platform-permissions.js';
import type { PluginInstallations } from '../../../plugins/plugin-installations.js';
import { MAX_QUEUED_WRITERS, type PluginSettings, type SettingsCaller } from '../../../plugins/settings/plugin-settings.js';
import type { ResolvedSettings } from '../../../plugins/settings/settings-layers.js';
import { SETTINGS_LAYERS, WRITABLE_LAYERS } from '../../../plugins/settings/settings-schema.js';
import { coordinated } from '../../../runtime/coordination.js';
import { apiSchema } from '../api-schemas.js';
import { principalAs, type Principal } from '../credentials.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { PROBLEM_TABLE_STATUSES } from './status.routes.js';

export interface PluginSettingsDependencies {
  readonly installations: PluginInstallations;
  readonly settings: PluginSettings;
}

const SETTING_NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
const SettingValue = z.union([z.number(), z.boolean(), z.string().max(4096)]);
const LayerValues = z.record(z.string(), SettingValue);
const Layer = z.enum(SETTINGS_LAYERS);
const WritableLayer = z.enum(WRITABLE_LAYERS);

const PluginSettingsResponse = apiSchema(
  'PluginSettings',
  z.strictObject({
    pluginId: z.string(),
    schemaVersion: z.string().describe('Version of the installed settings schema every delivered leaf satisfies (Media: `1.0.0`).'),
    resolved: LayerValues.describe('The winning value of every setting that has one. `session` settings never appear: they are never stored.'),
    layers: z
      .strictObject({
        plugin_default: LayerValues.describe('The defaults of the installed schema.'),
        environment: LayerValues.describe("Set by the Environment's admin (its owner) for everyone in it."),
        user: LayerValues.describe("The caller's own, in every Environment."),
        user_environment: LayerValues.describe("The caller's own, in this Environment only."),
      })
      .describe('Exactly the inputs of resolution. A persisted leaf that no longer satisfies the installed schema is not among them.'),
    provenance: z.record(z.string(), Layer).describe('For every member of `resolved`, the layer it came from.'),
    etag: z.string().describe('The aggregate tag, identical to the `ETag` header; send it as `If-Match` to write.'),
  }),
  "A person's settings of one installed Plugin in the Environment of their Runtime.",
);

const PluginSettingsWriteRequest = apiSchema(
  'PluginSettingsWriteRequest',
  z.strictObject({
    layer: WritableLayer.describe('The layer to change. `environment` needs the Environment admin role.'),
    settings: z
      .record(z.string().regex(SETTING_NAME), SettingValue)
      .refine((settings) => Object.keys(settings).length > 0, 'name at least one setting')
      .refine((settings) => Object.keys(settings).length <= 64, 'at most 64 settings')
      .meta({ minProperties: 1, maxProperties: 64 })
      .describe('The leaves to set in that layer. Other leaves of the layer stay; nothing is copied from other layers.'),
  }),
);

const Params = z.strictObject({ pluginId: z.string().regex(PLUGIN_ID).describe('The Plugin, e.g. `plg_media`.') });

const ClearQuery = z.strictObject({
  layer: WritableLayer.describe('The layer to clear.'),
  setting: z
    .union([z.string().regex(SETTING_NAME), z.array(z.string().regex(SETTING_NAME)).min(1).max(64)])
    .optional()
    .describe('Clear only these settings of the layer (repeat the parameter for several); the whole layer when absent.'),
});

const ETAG_HEADER = { ETag: { description: 'The aggregate settings tag (strong), equal to the body\'s `etag`.', schema: z.string() } };

const IF_MATCH_HEADER = {
  'If-Match': {
    description: 'The aggregate tag of the settings this write is based on (the `ETag` of the last read or write).',
    required: true,
    schema: z.string(),
  },
};

const READ_CONDITION_HEADERS = {
  'If-Match': {
    description: 'Answer only if the settings still have one of these tags (strong comparison; `*` always holds): `412` otherwise.',
    required: false,
    schema: z.string(),
  },
  'If-None-Match': {
    description: 'The tags of copies already held (weak comparison; `*` names any): `304` when one is current.',
    required: false,
    schema: z.string(),
  },
};

const WRITE_RULES =
  `Only for a Plugin whose release requests the platform permission \`${SETTINGS_WRITE_PERMISSION}\` (\`403 ` +
  'plugin_permission_not_requested` otherwise, before `If-Match` is looked at). ' +
  'Needs `If-Match` with the current aggregate tag: missing (or `*`) is `428 if_match_required`, a header that is not ' +
  'a list of quoted entity tags `400 if_match_invalid`, a tag that is no longer current (a weak tag never matches) ' +
  '`412 settings_tag_mismatch` (its `ETag` header carries the current tag); of two writers holding the ' +
  'same tag exactly one succeeds. Only the caller\'s own `user` and `user_environment` layers, and the `environment` ' +
  'layer for the Environment\'s admin (its owner; `403 environment_admin_required` otherwise), can be changed. Each ' +
  'setting is accepted only at the scopes its schema allows: `422` with `setting_unknown`, `setting_session_scoped` ' +
  '(a `session` setting such as Media\'s `inputDeviceId` is never stored), `setting_scope_not_allowed` (e.g. Media\'s ' +
  '`volume` at `environment`) or `setting_value_invalid`, the code of the first refusal in that order, and every ' +
  'refused setting by JSON Pointer in `error.details`. Persistent `user` and `user_environment` writes need an account; ' +
  'every Runtime caller has one (the registry issues no guest Runtime credential). At most ' + String(MAX_QUEUED_WRITERS) + ' ' +
  'writes of one person to one Plugin\'s settings are under way at once (they take turns); more answer `429 rate_limited`.';

/** The Runtime plane's Plugin settings: resolve, set leaves of a layer, clear a layer. */
export function pluginSettingsRoutes(deps: PluginSettingsDependencies): AnyRoute[] {
  const common = {
    tags: ['Runtime'],
    path: '/v1/runtime/plugins/{pluginId}/settings',
    credential: 'runtimeActive',
    cors: true,
    errorFormat: 'api',
    params: Params,
  } as const;
  const write = { requestHeaders: IF_MATCH_HEADER, errors: [...PROBLEM_TABLE_STATUSES, 412, 428] } as const;
  const context = async (
    principal: Principal,
    pluginId: string,
    permission: typeof SETTINGS_READ_PERMISSION | typeof SETTINGS_WRITE_PERMISSION,
  ): Promise<{ caller: SettingsCaller; release: PluginRelease }> => {
    const { caller, holdFence } = principalAs(principal, 'runtimeActive');
    const release = await coordinated(() => deps.installations.installed(caller.environmentId, pluginId));
    if (!release) {
      throw new HttpError(404, 'plugin_not_installed', `this Environment has not installed ${pluginId}`, { family: 'catalog' });
    }
    requirePlatformPermission(release, permission);
    return { caller: { accountId: caller.accountId, environmentId: caller.environmentId, holdFence }, release };
  };
  return [
    defineRoute({
      ...common,
      operationId: 'getRuntimePluginSettings',
      method: 'get',
      summary: 'Resolve the settings of an installed Plugin',
      description:
        'Active Runtime session and lease. The four layers, weakest first: `plugin_default` (the installed schema), ' +
        '`environment`, `user` (the account, in every Environment), `user_environment` (the account in this ' +
        'Environment). Every persisted leaf is validated against the installed schema on every read (known setting, ' +
        'its type and bounds, a scope it is still allowed at); one that fails is never delivered. The `ETag` header ' +
        'and `etag` are a digest of what is delivered. A Plugin this Environment has not installed is ' +
        '`404 plugin_not_installed`; one whose release does not request the platform permission ' +
        `\`${SETTINGS_READ_PERMISSION}\` is \`403 plugin_permission_not_requested\` (its conditions are not evaluated). ` +
        'Conditional reads follow RFC 9110 13.2.2: `If-Match` naming no current tag is ' +
        '`412 settings_tag_mismatch` (with the current `ETag`); then `If-None-Match` naming the current tag is `304` ' +
        '(with it, no body). A malformed list is `400 if_match_invalid` or `if_none_match_invalid`.',
      requestHeaders: READ_CONDITION_HEADERS,
      errors: [...PROBLEM_TABLE_STATUSES, 412],
      responses: {
        200: { description: 'The resolved settings.', schema: PluginSettingsResponse, headers: ETAG_HEADER },
        304: { description: 'The copy `If-None-Match` names is current.', headers: ETAG_HEADER },
      },
      handler: async ({ principal, params, headers, logger }) => {
        const { caller, release } = await context(principal, params.pluginId, SETTINGS_READ_PERMISSION);
        const ifMatch = conditionTags(headers, 'if-match');
        const ifNoneMatch = conditionTags(headers, 'if-none-match');
        const settings = await coordinated(() => deps.settings.read(caller, release));
        logSkipped(settings, logger);
        const current = { etag: settings.etag };
        if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.some((t) => !t.weak && t.tag === settings.etag)) {
          throw new HttpError(412, 'settings_tag_mismatch', 'the settings no longer have the tag If-Match names', { headers: current });
        }
        if (ifNoneMatch === '*' || ifNoneMatch?.some((t) => t.tag === settings.etag)) return { status: 304, body: undefined, headers: current };
        return { status: 200, body: view(settings), headers: current };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'putRuntimePluginSettings',
      method: 'put',
      summary: 'Set settings in one layer',
      description: `Merges the named leaves into one layer and answers the settings as they are now (200). ${WRITE_RULES}`,
      ...write,
      body: PluginSettingsWriteRequest,
      maxBodyBytes: 16 * 1024,
      responses: { 200: { description: 'Written; the settings after the write.', schema: PluginSettingsResponse, headers: ETAG_HEADER } },
      handler: async ({ principal, params, headers, body, logger }) => {
        const { caller, release } = await context(principal, params.pluginId, SETTINGS_WRITE_PERMISSION);
        const tags = expectedTags(headers);
        const settings = await coordinated(() => deps.settings.write(caller, release, body, tags));
        logSkipped(settings, logger);
        return { status: 200, body: view(settings), headers: { etag: settings.etag } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'deleteRuntimePluginSettings',
      method: 'delete',
      summary: 'Clear a layer, or settings of it',
      description:
        'Removes every leaf of `layer` (or only the `setting`s named) and answers the settings as they are now (200); ' +
        `when nothing delivered was there, 204 with the unchanged \`ETag\`. ${WRITE_RULES}`,
      ...write,
      query: ClearQuery,
      responses: {
        200: { description: 'Cleared; the settings after it.', schema: PluginSettingsResponse, headers: ETAG_HEADER },
        204: { description: 'The layer (or the named settings of it) was already empty.', headers: ETAG_HEADER },
      },
      handler: async ({ principal, params, headers, query, logger }) => {
        const { caller, release } = await context(principal, params.pluginId, SETTINGS_WRITE_PERMISSION);
        const named = query.setting === undefined ? undefined : typeof query.setting === 'string' ? [query.setting] : query.setting;
        const tags = expectedTags(headers);
        const clear = { layer: query.layer, ...(named ? { settings: named } : {}) };
        const { changed, settings } = await coordinated(() => deps.settings.clear(caller, release, clear, tags));
        logSkipped(settings, logger);
        return changed ? { status: 200, body: view(settings), headers: { etag: settings.etag } } : { status: 204, body: undefined, headers: { etag: settings.etag } };
      },
    }),
  ];
}

function view(settings: ResolvedSettings): z.input<typeof PluginSettingsResponse> {
  const { pluginId, schemaVersion, resolved, layers, provenance, etag } = settings;
  return { pluginId, schemaVersion, resolved, layers, provenance, etag };
}

/** Leaves skipped on read are data an older schema allowed: worth knowing about, never worth failing the read for. */
function logSkipped(settings: ResolvedSettings, logger: Logger): void {
  if (settings.skipped.length === 0) return;
  logger.info({ pluginId: settings.pluginId, schemaVersion: settings.schemaVersion, skipped: settings.skipped.map((l) => `${l.layer}/${l.setting}`) }, 'persisted settings leaves fail the installed schema');
}

/**
 * One element of an entity-tag list (RFC 9110 8.8.3, 5.6.1): optional `W/`, then a quoted opaque string, then the
 * comma that ends it or the end of the header. Empty elements before it (`, ,`) are skipped by the loop below.
 */
const ENTITY_TAG = /[\t ]*(W\/)?("[\x21\x23-\x7e\x80-\xff]*")[\t ]*(?:,|$)/y;
/** Empty list elements: commas with optional whitespace around them. */
const EMPTY_ELEMENTS = /[\t ]*(?:,[\t ]*)*/y;

interface EntityTag {
  readonly weak: boolean;
  readonly tag: string;
}

/**
 * `If-Match` or `If-None-Match` (RFC 9110 13.1.1, 13.1.2): absent (or empty), `*`, or its entity tags. Empty list
 * elements are ignored, as RFC 9110 5.6.1.2 requires of every recipient of a list header (they are what merging header
 * lines or joining tags with a stray comma leaves); a header with no element at all is as malformed as one with a bad
 * element.
 */
function conditionTags(headers: Readonly<Record<string, string>>, name: 'if-match' | 'if-none-match'): '*' | EntityTag[] | undefined {
  const header = headers[name]?.trim() ?? '';
  if (header === '') return undefined;
  if (header === '*') return '*';
  const [field, code] = name === 'if-match' ? ['If-Match', 'if_match_invalid'] : ['If-None-Match', 'if_none_match_invalid'];
  const invalid = (): HttpError =>
    new HttpError(400, code, `${field} must be a list of quoted entity tags`, {
      details: [{ pointer: `/${field}`, in: 'header', code: 'invalid', message: 'not a list of quoted entity tags' }],
    });
  const tags: EntityTag[] = [];
  let at = 0;
  for (;;) {
    EMPTY_ELEMENTS.lastIndex = at;
    EMPTY_ELEMENTS.exec(header);
    at = EMPTY_ELEMENTS.lastIndex;
    if (at >= header.length) break;
    ENTITY_TAG.lastIndex = at;
    const match = ENTITY_TAG.exec(header);
    if (!match) throw invalid();
    at = ENTITY_TAG.lastIndex;
    tags.push({ weak: match[1] !== undefined, tag: match[2]! });
  }
  if (tags.length === 0) throw invalid();
  return tags;
}

/**
 * The strong tags of a write's `If-Match`. A weak tag never matches (If-Match compares strongly), and `*` would let a
 * write overwrite whatever is there, which is what the tag exists to prevent.
 */
function expectedTags(headers: Readonly<Record<string, string>>): string[] {
  const tags = conditionTags(headers, 'if-match');
  if (tags === undefined || tags === '*') {
    throw new HttpError(428, 'if_match_required', 'send If-Match with the settings tag (the ETag of the last read or write)');
  }
  return tags.filter((t) => !t.weak).map((t) => t.tag);
}
