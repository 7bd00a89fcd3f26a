import { sql, type Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import { writeAudit } from '../identity/audit.js';
import { newId } from '../identity/ids.js';
import { hashToken, newOpaqueToken } from '../identity/opaque-tokens.js';
import type { Database } from '../storage/database.js';
import type { RuntimeCaller } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import { coordinated } from './coordination.js';
import { fencedGrantColumns, liveFencedGrant, refuseUndeclaredScopes, type IssuingFence, type LiveFencedGrant } from './grant-fence.js';
import type { RuntimeSessions } from './runtime-sessions.js';

export const BACKEND_GRANT_TTL_S = 5 * 60;
const ISSUE_ATTEMPTS = 3;
/** What a page may hand its backend through a grant: flat, small, opaque to the registry. */
export type GrantContext = Readonly<Record<string, string | number | boolean>>;

export interface EnvironmentBackend {
  readonly environmentId: string;
  readonly endpoint: string;
  readonly scopes: readonly string[];
}

export interface IssuedBackendGrant {
  readonly grantId: string;
  readonly token: string;
  readonly endpoint: string;
  readonly scopes: readonly string[];
  readonly expiresAt: number;
}

export type Introspection =
  | { readonly active: false }
  | (LiveFencedGrant & { readonly active: true; readonly context: GrantContext; readonly endpoint: string });

/** An Environment backend endpoint: https (http only on loopback, for development), no fragment, no credentials. */
export function backendEndpoint(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const loopback = ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
  if (!(url.protocol === 'https:' || (url.protocol === 'http:' && loopback))) return undefined;
  // An empty fragment ('…#') reads as hash '' but stays in href: the '#' itself is what no endpoint may carry.
  if (text.includes('#') || url.username !== '' || url.password !== '' || url.href !== text) return undefined;
  return url.href;
}

/**
 * Environment Backend Grants: what a Runtime page hands its Environment's backend so the backend knows, from the
 * registry, who is calling and under which live lease. The page chooses only scopes (among those the Environment
 * declared) and an opaque context; the registry derives everything else. A grant is short-lived, bound to the one
 * endpoint the Environment declared, and introspection fails closed the moment its fence no longer holds.
 */
export class BackendGrants {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly sessions: RuntimeSessions,
    /** Whether the sign-in (OAuth grant) behind a runtime token still holds: not revoked, not expired, epoch current. */
    private readonly signInLive: (oauthGrantId: string) => Promise<boolean>,
  ) {}

  async declare(backend: EnvironmentBackend, actor: string): Promise<EnvironmentBackend> {
    const at = new Date(this.clock.now());
    await this.db.transaction().execute(async (trx) => {
      // The upsert comes first: its row lock, held until commit, orders this redeclaration against every grant being
      // issued (insertIfStillDeclared), so the revocation below sees each grant that the new declaration did not refuse.
      await trx
        .insertInto('environment_backends')
        .values({ environment_id: backend.environmentId, endpoint: backend.endpoint, scopes: JSON.stringify(backend.scopes), updated_at: at })
        .onConflict((oc) => oc.column('environment_id').doUpdateSet({ endpoint: backend.endpoint, scopes: JSON.stringify(backend.scopes), updated_at: at }))
        .execute();
      // Grants hold only what the Environment declares now: those for another endpoint, or with a scope no longer
      // declared, end with the declaration that withdrew it.
      await trx
        .updateTable('environment_backend_grants')
        .set({ revoked_at: at, revoked_reason: 'backend_redeclared' })
        .where('environment_id', '=', backend.environmentId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', at)
        .where(sql<boolean>`(endpoint <> ${backend.endpoint} OR NOT (scopes <@ ${JSON.stringify(backend.scopes)}::jsonb))`)
        .execute();
      await writeAudit(trx, { action: 'environment.backend.declare', actor, target: `environment:${backend.environmentId}`, data: { endpoint: backend.endpoint, scopes: backend.scopes } }, at);
    });
    return backend;
  }

  async backendOf(environmentId: string): Promise<EnvironmentBackend | undefined> {
    const row = await this.db.selectFrom('environment_backends').selectAll().where('environment_id', '=', environmentId).executeTakeFirst();
    return row ? { environmentId: row.environment_id, endpoint: row.endpoint, scopes: row.scopes } : undefined;
  }

  async issue(
    caller: RuntimeCaller,
    fence: IssuingFence,
    request: { scopes: readonly string[]; context: GrantContext },
    environmentRoles: readonly string[],
  ): Promise<IssuedBackendGrant> {
    return coordinated(async () => {
      // A miss means a redeclaration committed since the read: the request is judged again against the declaration
      // that now stands (refused like any other, or issued for the new endpoint). Each miss needs another redeclaration
      // committed within a round trip, so running out of attempts is a defect, not operators at work.
      for (let attempt = 1; ; attempt++) {
        const backend = await this.backendOf(caller.environmentId);
        if (!backend) {
          throw new HttpError(409, 'environment_backend_not_declared', 'this Environment has declared no backend, so no grant can be issued for it', { family: 'catalog' });
        }
        refuseUndeclaredScopes(request.scopes, backend.scopes, 'the Environment');
        const issued = await this.insertIfStillDeclared(caller, fence, request, environmentRoles, backend);
        if (issued) return issued;
        if (attempt === ISSUE_ATTEMPTS) throw new Error(`a backend grant for ${caller.environmentId} missed its declaration ${ISSUE_ATTEMPTS} times in a row`);
      }
    });
  }

  /**
   * Inserts the grant only if the declaration still names `backend.endpoint` and covers the scopes, in one statement
   * that holds the declaration row FOR SHARE. declare() updates that row and revokes the grants that no longer fit in
   * one transaction, so the two are ordered by the row lock: a grant inserted first is seen by that revocation, and an
   * insert that waited on the redeclaration re-checks its WHERE against the new row (READ COMMITTED) and inserts
   * nothing. Reading the declaration, then inserting, would let a redeclaration commit in between and miss the grant.
   */
  private async insertIfStillDeclared(
    caller: RuntimeCaller,
    fence: IssuingFence,
    request: { scopes: readonly string[]; context: GrantContext },
    environmentRoles: readonly string[],
    backend: EnvironmentBackend,
  ): Promise<IssuedBackendGrant | undefined> {
    const { token, hash } = newOpaqueToken('ebg');
    const grantId = newId('ebgr');
    const now = this.clock.now();
    const expiresAt = now + BACKEND_GRANT_TTL_S * 1000;
    const values = {
      id: grantId,
      token_hash: hash,
      ...fencedGrantColumns(caller, fence, environmentRoles, now, expiresAt),
      scopes: JSON.stringify(request.scopes),
      context: JSON.stringify(request.context),
    };
    // Bare parameters: INSERT … SELECT types them by the columns they land in (jsonb, timestamptz, int8), as VALUES would.
    const columns = Object.keys(values) as (keyof typeof values)[];
    const result = await this.db
      .insertInto('environment_backend_grants')
      .columns([...columns, 'endpoint'])
      .expression((eb) =>
        eb
          .selectFrom('environment_backends')
          .select((s) => [...columns.map((column) => s.val(values[column]).as(column)), 'endpoint'])
          .where('environment_id', '=', caller.environmentId)
          .where('endpoint', '=', backend.endpoint)
          .where(sql<boolean>`scopes @> ${values.scopes}::jsonb`)
          .forShare(),
      )
      .executeTakeFirst();
    if (Number(result.numInsertedOrUpdatedRows ?? 0n) === 0) return undefined;
    return { grantId, token, endpoint: backend.endpoint, scopes: request.scopes, expiresAt };
  }

  /** Revokes one grant of the caller's session; false when the session holds no such grant. */
  async revoke(caller: RuntimeCaller, sessionId: string, grantId: string): Promise<boolean> {
    // Both statements inside: Postgres lost between them is an outage (503), not an internal error.
    return coordinated(async () => {
      const result = await this.db
        .updateTable('environment_backend_grants')
        .set({ revoked_at: new Date(this.clock.now()), revoked_reason: 'revoked' })
        .where('id', '=', grantId)
        .where('session_id', '=', sessionId)
        .where('account_id', '=', caller.accountId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) > 0) return true;
      const exists = await this.db.selectFrom('environment_backend_grants').select('id').where('id', '=', grantId).where('session_id', '=', sessionId).where('account_id', '=', caller.accountId).executeTakeFirst();
      return exists !== undefined;
    });
  }

  /**
   * Whether a grant holds right now for the backend at `endpoint`. Inactive (never an error) when it is unknown,
   * for another endpoint, expired or revoked; when its sign-in ended (logout, revocation, account epoch); and when its
   * Runtime no longer holds the lease it was issued under (superseded, released, lapsed, revoked).
   */
  async introspect(token: string, endpoint: string): Promise<Introspection> {
    return coordinated(async () => {
      const inactive = { active: false } as const;
      const row = await this.db.selectFrom('environment_backend_grants').selectAll().where('token_hash', '=', hashToken(token)).executeTakeFirst();
      if (!row || row.endpoint !== endpoint) return inactive;
      const live = await liveFencedGrant(row, this.clock.now(), this.sessions, this.signInLive);
      return live ? { ...live, active: true, context: row.context, endpoint: row.endpoint } : inactive;
    });
  }
}
