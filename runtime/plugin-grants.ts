import type { Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import { newId } from '../identity/ids.js';
import { hashToken, newOpaqueToken } from '../identity/opaque-tokens.js';
import type { PluginRelease } from '../plugins/plugin-catalog.js';
import { requirePlatformPermission } from '../plugins/platform-permissions.js';
import type { Database } from '../storage/database.js';
import type { RuntimeCaller } from '../transport/http/credentials.js';
import { HttpError, validationDetails } from '../transport/http/errors.js';
import { coordinated } from './coordination.js';
import { KeyedListeners } from './keyed-listeners.js';
import { fencedGrantColumns, liveFencedGrant, refuseUndeclaredScopes, type IssuingFence, type LiveFencedGrant } from './grant-fence.js';
import type { RuntimeSessions } from './runtime-sessions.js';

export const PLUGIN_GRANT_TTL_S = 5 * 60;
export const PLUGIN_GRANT_PERMISSION = 'plugin-grant:request';

export interface PluginGrantRequest {
  readonly component: string;
  readonly scopes: readonly string[];
  readonly context: unknown;
}

export interface IssuedPluginGrant {
  readonly grantId: string;
  readonly token: string;
  readonly scopes: readonly string[];
  readonly context: Readonly<Record<string, string>>;
  readonly expiresAt: number;
}

/** A grant that holds right now, as its backend component sees it. */
export interface LivePluginGrant extends LiveFencedGrant {
  /** The registry's own account id: for this node's bookkeeping only, never shown to the Plugin or a backend. */
  readonly accountId: string;
  readonly pluginId: string;
  readonly component: string;
  readonly context: Readonly<Record<string, string>>;
}

/**
 * Plugin Grants: an active Runtime whose installed Plugin requests the platform permission `plugin-grant:request`
 * obtains a short-lived grant for one of that Plugin's backend components, with scopes among the component's and a
 * context the component's schema admits. The registry derives the actor, origin, Environment roles and Runtime fence.
 * A grant ends at expiry, on revocation, and the moment its fence stops holding (supersession, release, lapse,
 * logout): every use checks that online, so no separate revocation sweep can be missed.
 */
export class PluginGrants {
  /** In-process listeners by grant id: a connection made with a grant closes the moment it is revoked. */
  readonly #revocationListeners = new KeyedListeners<() => void>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly sessions: RuntimeSessions,
    private readonly signInLive: (oauthGrantId: string) => Promise<boolean>,
    private readonly installed: (environmentId: string, pluginId: string) => Promise<PluginRelease | undefined>,
  ) {}

  async issue(
    caller: RuntimeCaller,
    fence: IssuingFence,
    pluginId: string,
    request: PluginGrantRequest,
    environmentRoles: readonly string[],
  ): Promise<IssuedPluginGrant> {
    return coordinated(async () => {
      const release = await this.installed(caller.environmentId, pluginId);
      if (!release) throw new HttpError(404, 'plugin_not_installed', `this Environment has not installed ${pluginId}`, { family: 'catalog' });
      requirePlatformPermission(release, PLUGIN_GRANT_PERMISSION);
      const component = release.backendComponents.find((c) => c.id === request.component);
      if (!component) {
        throw new HttpError(422, 'plugin_component_unknown', `${pluginId} has no backend component ${request.component}`, {
          details: [{ pointer: '/component', in: 'body', code: 'unknown', message: `components: ${release.backendComponents.map((c) => c.id).join(', ')}` }],
        });
      }
      refuseUndeclaredScopes(request.scopes, component.grantScopes, `the ${component.id} component`);
      const context = component.context.safeParse(request.context);
      if (!context.success) {
        throw new HttpError(422, 'grant_context_invalid', `the context of a ${component.id} grant is exactly the properties its schema names`, {
          details: validationDetails(context.error, 'body').map((detail) => ({ ...detail, pointer: `/context${detail.pointer}` })),
        });
      }
      const { token, hash } = newOpaqueToken('pgt');
      const grantId = newId('pgr');
      const now = this.clock.now();
      const expiresAt = now + PLUGIN_GRANT_TTL_S * 1000;
      await this.db
        .insertInto('plugin_grants')
        .values({
          id: grantId,
          token_hash: hash,
          plugin_id: pluginId,
          component: component.id,
          ...fencedGrantColumns(caller, fence, environmentRoles, now, expiresAt),
          scopes: JSON.stringify(request.scopes),
          context: JSON.stringify(context.data),
        })
        .execute();
      return { grantId, token, scopes: request.scopes, context: context.data, expiresAt };
    });
  }

  /** Revokes one grant of the caller's session; false when the session never held it. */
  async revoke(caller: RuntimeCaller, sessionId: string, pluginId: string, grantId: string): Promise<boolean> {
    return coordinated(async () => {
      const row = await this.db
        .selectFrom('plugin_grants')
        .select(['id', 'revoked_at'])
        .where('id', '=', grantId)
        .where('plugin_id', '=', pluginId)
        .where('session_id', '=', sessionId)
        .where('account_id', '=', caller.accountId)
        .executeTakeFirst();
      if (!row) return false;
      if (row.revoked_at === null) {
        await this.db.updateTable('plugin_grants').set({ revoked_at: new Date(this.clock.now()) }).where('id', '=', grantId).execute();
        this.#revocationListeners.notify(grantId);
      }
      return true;
    });
  }

  /** Calls `listener` when this node revokes the grant; returns the unsubscribe. */
  onRevoked(grantId: string, listener: () => void): () => void {
    return this.#revocationListeners.add(grantId, listener);
  }

  /**
   * The grant behind `token` if it holds right now for `pluginId`; undefined when it is unknown, for another Plugin,
   * expired or revoked, or when its sign-in or its lease no longer holds.
   */
  async verify(token: string, pluginId: string): Promise<LivePluginGrant | undefined> {
    return coordinated(async () => {
      const row = await this.db.selectFrom('plugin_grants').selectAll().where('token_hash', '=', hashToken(token)).executeTakeFirst();
      if (!row || row.plugin_id !== pluginId) return undefined;
      const live = await liveFencedGrant(row, this.clock.now(), this.sessions, this.signInLive);
      return live && { ...live, accountId: row.account_id, pluginId: row.plugin_id, component: row.component, context: row.context };
    });
  }
}
