import { createHash } from 'node:crypto';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database, OAuthCodeTable } from '../storage/database.js';
import { StatementBatcher } from '../storage/statement-batcher.js';
import { HttpError } from '../transport/http/errors.js';
import type { EnvironmentDirectory, OidcClient } from './environments.js';
import { newId } from './ids.js';
import { hashToken, newOpaqueToken } from './opaque-tokens.js';
import type { RegistrySigningKeys } from './signing-keys.js';

export const ACCESS_TOKEN_TYPE = 'at+jwt';
export const ACCESS_TOKEN_TTL_S = 10 * 60;
export const ID_TOKEN_TTL_S = 10 * 60;
export const CODE_TTL_MS = 60_000;
/** A CLI sign-in lasts this long however often it refreshes; then the person signs in again. */
export const CLI_GRANT_TTL_MS = 30 * 24 * 3600_000;
/** An Environment grant lives as long as the page session it came from could; its tokens are renewed by re-authorizing. */
export const ENVIRONMENT_GRANT_TTL_MS = 12 * 3600_000;
export const DESKTOP_SESSION_TTL_S = 60 * 60;

/** Audiences of registry access tokens: management calls (CLI, desktop) and Runtime calls (Environment clients). */
export const MANAGEMENT_AUDIENCE = 'registry-management';
export const RUNTIME_AUDIENCE = 'registry-runtime';

/** Scopes each kind of client may ask for; an absent `scope` means all of them. */
export const CLIENT_SCOPES: Readonly<Record<OidcClient['kind'], readonly string[]>> = {
  environment: ['openid', 'runtime'],
  cli: ['openid', 'management'],
};

export type GrantKind = 'environment' | 'cli' | 'desktop';

export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: 'Bearer';
  readonly expires_in: number;
  readonly scope: string;
  readonly id_token?: string;
  readonly refresh_token?: string;
}

export interface LiveGrant {
  readonly id: string;
  readonly kind: GrantKind;
  readonly clientId: string | null;
  readonly accountId: string;
  readonly accountEpoch: number;
  readonly deviceId: string | null;
  readonly browserId: string | null;
  readonly environmentId: string | null;
  readonly scopes: readonly string[];
  readonly createdAt: number;
  readonly lastUsedAt: number;
  readonly expiresAt: number;
}

export interface GrantDependencies {
  readonly db: Kysely<Database>;
  readonly clock: Clock;
  readonly keys: RegistrySigningKeys;
  readonly directory: EnvironmentDirectory;
  /** The account's current epoch: material issued under an older one no longer works. */
  readonly epochOf: (accountId: string) => Promise<number>;
  readonly issuer: () => string;
}

const invalidGrant = (code: string, message: string): HttpError => new HttpError(400, code, message, { oauthError: 'invalid_grant' });

export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

type GrantRow = {
  id: string;
  kind: GrantKind;
  client_id: string | null;
  account_id: string;
  account_epoch: number;
  device_id: string | null;
  browser_id: string | null;
  environment_id: string | null;
  scopes: string[];
  created_at: Date;
  last_used_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
};

type CodeRow = Selectable<OAuthCodeTable>;
type SpentRefresh = GrantRow & { generation: number; token_hash: string };

/** Rows as `jsonb_to_recordset` reads them: times as ISO strings. */
interface NewCode {
  code_hash: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  scopes: readonly string[];
  nonce: string | null;
  account_id: string;
  account_epoch: number;
  browser_id: string;
  auth_time: string;
  expires_at: string;
}

interface NewGrant {
  id: string;
  kind: GrantKind;
  client_id: string;
  account_id: string;
  account_epoch: number;
  browser_id: string;
  environment_id: string | null;
  scopes: readonly string[];
  created_at: string;
  expires_at: string;
  refresh_hash: string | null;
  code_hash: string;
}

interface NewRefresh {
  token_hash: string;
  grant_id: string;
  generation: number;
  created_at: string;
}

/**
 * Answers a batch of single-use claims: each returned row goes to the first request that named it; a second request
 * for the same secret in the same batch lost the race, exactly as if it had come in a later batch.
 */
function firstClaims<R>(keys: readonly string[], rows: readonly R[], keyOf: (row: R) => string): Array<R | undefined> {
  const byKey = new Map(rows.map((r) => [keyOf(r), r]));
  return keys.map((key) => {
    const row = byKey.get(key);
    byKey.delete(key);
    return row;
  });
}

function liveGrant(row: GrantRow): LiveGrant {
  return {
    id: row.id,
    kind: row.kind,
    clientId: row.client_id,
    accountId: row.account_id,
    accountEpoch: Number(row.account_epoch),
    deviceId: row.device_id,
    browserId: row.browser_id,
    environmentId: row.environment_id,
    scopes: row.scopes,
    createdAt: row.created_at.getTime(),
    lastUsedAt: row.last_used_at.getTime(),
    expiresAt: row.expires_at.getTime(),
  };
}

/**
 * OAuth grants: what an authorization (or a desktop device) handed to a client, and the material issued under it.
 * A grant is the unit of revocation: its access tokens are checked against it online, its refresh tokens rotate
 * inside it, and revoking it (by the person, by logout, by refresh-token reuse, by a stale account epoch) ends
 * all of them. Authorization codes and refresh tokens are stored only as hashes and consumed by one conditional
 * UPDATE each, so of two racing uses exactly one wins.
 */
export class OAuthGrants {
  readonly #d: GrantDependencies;
  // Every write of the token endpoint and the authorization page is group-committed: see StatementBatcher.
  readonly #insertCodes: StatementBatcher<NewCode, undefined>;
  readonly #consumeCodes: StatementBatcher<string, CodeRow | undefined>;
  readonly #createGrants: StatementBatcher<NewGrant, undefined>;
  readonly #spendRefreshTokens: StatementBatcher<string, SpentRefresh | undefined>;
  readonly #storeRefreshTokens: StatementBatcher<NewRefresh, undefined>;

  constructor(dependencies: GrantDependencies) {
    this.#d = dependencies;
    const db = dependencies.db;
    this.#insertCodes = new StatementBatcher(async (codes) => {
      await sql`
        INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, nonce, account_id, account_epoch, browser_id, auth_time, expires_at)
        SELECT code_hash, client_id, redirect_uri, code_challenge, scopes, nonce, account_id, account_epoch, browser_id, auth_time, expires_at
        FROM jsonb_to_recordset(${JSON.stringify(codes)}::jsonb) AS x(code_hash text, client_id text, redirect_uri text, code_challenge text,
          scopes jsonb, nonce text, account_id text, account_epoch int8, browser_id text, auth_time timestamptz, expires_at timestamptz)`.execute(db);
      return codes.map(() => undefined);
    });
    this.#consumeCodes = new StatementBatcher(async (hashes) => {
      const { rows } = await sql<CodeRow>`
        UPDATE oauth_codes SET used_at = ${new Date(this.#d.clock.now())}
        WHERE code_hash = ANY(${hashes}::text[]) AND used_at IS NULL RETURNING *`.execute(db);
      return firstClaims(hashes, rows, (r) => r.code_hash);
    });
    this.#createGrants = new StatementBatcher(async (grants) => {
      // The grants, their first refresh tokens and the codes' links to them, in one statement.
      await sql`
        WITH input AS (
          SELECT * FROM jsonb_to_recordset(${JSON.stringify(grants)}::jsonb) AS x(id text, kind text, client_id text, account_id text,
            account_epoch int8, browser_id text, environment_id text, scopes jsonb, created_at timestamptz, expires_at timestamptz,
            refresh_hash text, code_hash text)
        ), grant_rows AS (
          INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, browser_id, environment_id, scopes, created_at, last_used_at, expires_at)
          SELECT id, kind, client_id, account_id, account_epoch, browser_id, environment_id, scopes, created_at, created_at, expires_at FROM input
        ), refresh_rows AS (
          INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
          SELECT refresh_hash, id, 1, created_at FROM input WHERE refresh_hash IS NOT NULL
        )
        UPDATE oauth_codes c SET grant_id = input.id FROM input WHERE c.code_hash = input.code_hash`.execute(db);
      return grants.map(() => undefined);
    });
    this.#spendRefreshTokens = new StatementBatcher(async (hashes) => {
      const { rows } = await sql<SpentRefresh>`
        WITH spent AS (
          UPDATE oauth_refresh_tokens SET used_at = ${new Date(this.#d.clock.now())}
          WHERE token_hash = ANY(${hashes}::text[]) AND used_at IS NULL
          RETURNING token_hash, grant_id, generation
        )
        SELECT g.*, spent.generation, spent.token_hash FROM spent JOIN oauth_grants g ON g.id = spent.grant_id`.execute(db);
      return firstClaims(hashes, rows, (r) => r.token_hash);
    });
    this.#storeRefreshTokens = new StatementBatcher(async (tokens) => {
      await sql`
        WITH input AS (
          SELECT * FROM jsonb_to_recordset(${JSON.stringify(tokens)}::jsonb) AS x(token_hash text, grant_id text, generation int4, created_at timestamptz)
        ), touched AS (
          UPDATE oauth_grants g SET last_used_at = input.created_at FROM input WHERE g.id = input.grant_id
        )
        INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
        SELECT token_hash, grant_id, generation, created_at FROM input`.execute(db);
      return tokens.map(() => undefined);
    });
  }

  /** Issues a single-use authorization code for an authorization the person just made on the registry's page. */
  async issueCode(input: {
    client: OidcClient;
    redirectUri: string;
    codeChallenge: string;
    scopes: readonly string[];
    nonce: string | undefined;
    accountId: string;
    accountEpoch: number;
    browserId: string;
  }): Promise<string> {
    const now = this.#d.clock.now();
    const code = newOpaqueToken('rac');
    await this.#insertCodes.submit({
      code_hash: code.hash,
      client_id: input.client.clientId,
      redirect_uri: input.redirectUri,
      code_challenge: input.codeChallenge,
      scopes: input.scopes,
      nonce: input.nonce ?? null,
      account_id: input.accountId,
      account_epoch: input.accountEpoch,
      browser_id: input.browserId,
      auth_time: new Date(now).toISOString(),
      expires_at: new Date(now + CODE_TTL_MS).toISOString(),
    });
    return code.token;
  }

  /** `grant_type=authorization_code`: PKCE S256 verified, code consumed once, a grant created and tokens signed. */
  async exchangeCode(input: { client: OidcClient; code: string; redirectUri: string; codeVerifier: string }): Promise<TokenResponse> {
    const { db, clock } = this.#d;
    const now = clock.now();
    const codeHash = hashToken(input.code);
    const consumed = await this.#consumeCodes.submit(codeHash);
    if (!consumed) {
      const spent = await db.selectFrom('oauth_codes').select(['grant_id']).where('code_hash', '=', codeHash).executeTakeFirst();
      if (!spent) throw invalidGrant('authorization_code_invalid', 'the authorization code is not known');
      // RFC 6749 4.1.2: a code used twice is evidence of theft; what the first use obtained is revoked too.
      if (spent.grant_id) await this.#revoke(spent.grant_id, 'authorization_code_reuse');
      throw invalidGrant('authorization_code_reused', 'the authorization code was already used; the grant it produced is revoked');
    }
    if (consumed.client_id !== input.client.clientId) throw invalidGrant('authorization_code_invalid', 'the authorization code was issued to another client');
    if (consumed.expires_at.getTime() <= now) throw invalidGrant('authorization_code_expired', 'the authorization code has expired');
    if (consumed.redirect_uri !== input.redirectUri) throw invalidGrant('redirect_uri_mismatch', 'redirect_uri differs from the one of the authorization request');
    if (s256(input.codeVerifier) !== consumed.code_challenge) throw invalidGrant('pkce_verifier_mismatch', 'code_verifier does not match the code_challenge');
    const epoch = await this.#d.epochOf(consumed.account_id);
    if (epoch !== Number(consumed.account_epoch)) throw invalidGrant('account_epoch_stale', "the account's devices changed since this authorization");

    const kind: GrantKind = input.client.kind;
    const grantId = newId('grt');
    const refresh = kind === 'cli' ? newOpaqueToken('rrt') : undefined;
    const ttl = kind === 'cli' ? CLI_GRANT_TTL_MS : ENVIRONMENT_GRANT_TTL_MS;
    await this.#createGrants.submit({
      id: grantId,
      kind,
      client_id: input.client.clientId,
      account_id: consumed.account_id,
      account_epoch: epoch,
      browser_id: consumed.browser_id,
      environment_id: input.client.environmentId,
      scopes: consumed.scopes,
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + ttl).toISOString(),
      refresh_hash: refresh?.hash ?? null,
      code_hash: codeHash,
    });
    const grant: LiveGrant = {
      id: grantId,
      kind,
      clientId: input.client.clientId,
      accountId: consumed.account_id,
      accountEpoch: epoch,
      deviceId: null,
      browserId: consumed.browser_id,
      environmentId: input.client.environmentId,
      scopes: consumed.scopes,
      createdAt: now,
      lastUsedAt: now,
      expiresAt: now + ttl,
    };
    const [access, id] = await Promise.all([
      this.#accessToken(grant),
      consumed.scopes.includes('openid') ? this.#idToken(grant, input.client, consumed.nonce, consumed.auth_time.getTime()) : undefined,
    ]);
    return {
      access_token: access,
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_TTL_S,
      scope: consumed.scopes.join(' '),
      ...(id ? { id_token: id } : {}),
      ...(refresh ? { refresh_token: refresh.token } : {}),
    };
  }

  /**
   * `grant_type=refresh_token` (CLI only): the presented token is spent and a new one issued in the same grant. A
   * spent token presented again means two parties hold the family: the whole grant is revoked (RFC 9700 4.14).
   */
  async refresh(input: { client: OidcClient; refreshToken: string }): Promise<TokenResponse> {
    const { db, clock } = this.#d;
    const now = clock.now();
    const hash = hashToken(input.refreshToken);
    const row = await this.#spendRefreshTokens.submit(hash);
    if (!row) {
      const known = await db.selectFrom('oauth_refresh_tokens').select('grant_id').where('token_hash', '=', hash).executeTakeFirst();
      if (!known) throw invalidGrant('refresh_token_invalid', 'the refresh token is not known');
      await this.#revoke(known.grant_id, 'refresh_token_reuse');
      throw invalidGrant('refresh_token_reused', 'the refresh token was already used; every token of this sign-in is revoked');
    }
    if (row.client_id !== input.client.clientId) throw invalidGrant('refresh_token_invalid', 'the refresh token was issued to another client');
    if (row.revoked_at !== null) throw invalidGrant('grant_revoked', 'this sign-in was revoked');
    if (row.expires_at.getTime() <= now) throw invalidGrant('grant_expired', 'this sign-in has expired; sign in again');
    const epoch = await this.#d.epochOf(row.account_id);
    if (epoch !== Number(row.account_epoch)) {
      await this.#revoke(row.id, 'account_epoch_stale');
      throw invalidGrant('account_epoch_stale', "the account's devices changed since this sign-in; sign in again");
    }
    const next = newOpaqueToken('rrt');
    await this.#storeRefreshTokens.submit({ token_hash: next.hash, grant_id: row.id, generation: row.generation + 1, created_at: new Date(now).toISOString() });
    const grant = liveGrant(row);
    return {
      access_token: await this.#accessToken(grant),
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_TTL_S,
      scope: grant.scopes.join(' '),
      refresh_token: next.token,
    };
  }

  /** A management session for the Desktop Shell, made under a device assertion; its scopes come from the server. */
  async createDesktopSession(input: { accountId: string; accountEpoch: number; deviceId: string; scopes: readonly string[] }): Promise<{ grant: LiveGrant; accessToken: string }> {
    const now = this.#d.clock.now();
    const grant: LiveGrant = {
      id: newId('dms'),
      kind: 'desktop',
      clientId: null,
      accountId: input.accountId,
      accountEpoch: input.accountEpoch,
      deviceId: input.deviceId,
      browserId: null,
      environmentId: null,
      scopes: input.scopes,
      createdAt: now,
      lastUsedAt: now,
      expiresAt: now + DESKTOP_SESSION_TTL_S * 1000,
    };
    await this.#d.db
      .insertInto('oauth_grants')
      .values({
        id: grant.id,
        kind: 'desktop',
        account_id: grant.accountId,
        account_epoch: grant.accountEpoch,
        device_id: grant.deviceId,
        scopes: JSON.stringify(grant.scopes),
        created_at: new Date(now),
        last_used_at: new Date(now),
        expires_at: new Date(grant.expiresAt),
      })
      .execute();
    return { grant, accessToken: await this.#accessToken(grant, DESKTOP_SESSION_TTL_S) };
  }

  /** A grant that is live now (not revoked, not expired), by id. */
  async live(grantId: string): Promise<LiveGrant | undefined> {
    const row = await this.#d.db.selectFrom('oauth_grants').selectAll().where('id', '=', grantId).executeTakeFirst();
    return row && row.revoked_at === null && row.expires_at.getTime() > this.#d.clock.now() ? liveGrant(row) : undefined;
  }

  /** The caller's live grants of one kind, newest first. */
  async list(accountId: string, kind: GrantKind): Promise<LiveGrant[]> {
    const rows = await this.#d.db
      .selectFrom('oauth_grants')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('kind', '=', kind)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', new Date(this.#d.clock.now()))
      .orderBy('created_at', 'desc')
      .execute();
    return rows.map(liveGrant);
  }

  /**
   * Revokes one grant the account owns, with everything issued under it. Undefined when the account owns no such
   * grant (another account's grant is indistinguishable from a missing one); revoking a revoked grant is a no-op.
   */
  async revokeOwned(accountId: string, grantId: string, kind: GrantKind, reason: string): Promise<{ revokedAt: number } | undefined> {
    const row = await this.#d.db
      .selectFrom('oauth_grants')
      .select(['revoked_at'])
      .where('id', '=', grantId)
      .where('account_id', '=', accountId)
      .where('kind', '=', kind)
      .executeTakeFirst();
    if (!row) return undefined;
    if (row.revoked_at) return { revokedAt: row.revoked_at.getTime() };
    return { revokedAt: await this.#revoke(grantId, reason) };
  }

  /**
   * Verifies a registry access token for `audience` online: signature, type, issuer and expiry offline, then its
   * grant live and issued under the account's current epoch. Throws 401 with a code naming the failure.
   */
  async verifyAccessToken(token: string, audience: string): Promise<LiveGrant> {
    let sid: unknown;
    try {
      const payload = await this.#d.keys.verify(token, { typ: ACCESS_TOKEN_TYPE, issuer: this.#d.issuer(), audience, clock: this.#d.clock });
      sid = payload.sid;
    } catch {
      throw new HttpError(401, 'access_token_invalid', 'the bearer token is not a valid, unexpired registry access token for this API', {
        family: 'management',
        headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      });
    }
    const grant = typeof sid === 'string' ? await this.live(sid) : undefined;
    if (!grant) {
      throw new HttpError(401, 'access_token_revoked', 'the session behind this token was revoked or has ended', {
        family: 'management',
        headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      });
    }
    if ((await this.#d.epochOf(grant.accountId)) !== grant.accountEpoch) {
      throw new HttpError(401, 'account_epoch_stale', "the account's devices changed since this token was issued; sign in again", { family: 'account_policy' });
    }
    return grant;
  }

  async #revoke(grantId: string, reason: string): Promise<number> {
    const now = this.#d.clock.now();
    await this.#d.db
      .updateTable('oauth_grants')
      .set({ revoked_at: new Date(now), revoked_reason: reason })
      .where('id', '=', grantId)
      .where('revoked_at', 'is', null)
      .execute();
    return now;
  }

  async #accessToken(grant: LiveGrant, ttl = ACCESS_TOKEN_TTL_S): Promise<string> {
    const environment = grant.kind === 'environment';
    const subject = environment ? this.#d.directory.pairwiseActorId(grant.accountId, grant.environmentId!) : grant.accountId;
    const signed = await this.#d.keys.sign(
      {
        sub: subject,
        sid: grant.id,
        scope: grant.scopes.join(' '),
        aep: grant.accountEpoch,
        ...(grant.clientId ? { client_id: grant.clientId } : {}),
        ...(environment ? { env: grant.environmentId! } : {}),
        jti: newId('jti'),
      },
      { typ: ACCESS_TOKEN_TYPE, issuer: this.#d.issuer(), audience: environment ? RUNTIME_AUDIENCE : MANAGEMENT_AUDIENCE, expiresInSeconds: ttl, clock: this.#d.clock },
    );
    return signed.token;
  }

  async #idToken(grant: LiveGrant, client: OidcClient, nonce: string | null, authTime: number): Promise<string> {
    const subject = grant.kind === 'environment' ? this.#d.directory.pairwiseActorId(grant.accountId, grant.environmentId!) : grant.accountId;
    const signed = await this.#d.keys.sign(
      { sub: subject, auth_time: Math.floor(authTime / 1000), azp: client.clientId, ...(nonce ? { nonce } : {}) },
      { typ: 'JWT', issuer: this.#d.issuer(), audience: client.clientId, expiresInSeconds: ID_TOKEN_TTL_S, clock: this.#d.clock },
    );
    return signed.token;
  }
}
