import { hash as digest } from 'node:crypto';
import { CompiledQuery, sql, type Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Logger } from '../server/logger.js';
import type { Database } from '../storage/database.js';
import { StatementBatcher } from '../storage/statement-batcher.js';
import { HttpError } from '../transport/http/errors.js';
import type { EnvironmentDirectory, OidcClient } from './environments.js';
import { newId } from './ids.js';
import { LIVE_SESSION_CAPS, liveSessionQuotaExceeded, lockAccountSessions, retryAfterSeconds } from './live-session-caps.js';
import { hashToken, newOpaqueToken } from './opaque-tokens.js';
import type { RegistrySigningKeys } from './signing-keys.js';

/**
 * The account's live grants of one kind and epoch. Read through the partial index of unrevoked grants by (account,
 * kind, expiry) (migration 0024): revoked and expired grants stay 30 days, and read as well, a Desktop Shell creating
 * and revoking its sessions made each next creation's count read more of them, without end. Exported for the test of
 * what it reads.
 */
export function liveGrantsOf(db: Kysely<Database>, accountId: string, kind: GrantKind, accountEpoch: number, now: number) {
  return db
    .selectFrom('oauth_grants')
    .where('account_id', '=', accountId)
    .where('kind', '=', kind)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', new Date(now))
    .where('account_epoch', '=', accountEpoch);
}

export const ACCESS_TOKEN_TYPE = 'at+jwt';
export const ID_TOKEN_TYPE = 'JWT';
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
  readonly logger: Pick<Logger, 'warn'>;
  /** How long after its rotation a refresh token may be presented once more, for a reply that was lost; 0: never. */
  readonly refreshReuseGraceSeconds: number;
}

const invalidGrant = (code: string, message: string): HttpError => new HttpError(400, code, message, { oauthError: 'invalid_grant' });

export function s256(verifier: string): string {
  return digest('sha256', verifier, 'base64url');
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

/** Rows as the batch statements read them: times as ISO strings. */
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
  session_id: string;
  auth_time: string | null;
  expires_at: string;
}

interface CodeExchange {
  code_hash: string;
  grant_id: string;
  kind: GrantKind;
  client_id: string;
  environment_id: string | null;
  redirect_uri: string;
  /** S256 of the presented verifier: the statement compares it with the stored challenge. */
  code_challenge: string;
  refresh_hash: string | null;
  at: string;
  grant_expires_at: string;
}

interface ExchangedCode {
  grant_id: string;
  scopes: string[];
  nonce: string | null;
  account_id: string;
  account_epoch: number;
  browser_id: string;
  auth_time: Date | null;
  /** The account's live CLI sign-ins before this batch, at most the cap; null for other clients. pg reads count() as text. */
  cli_live_before: string | null;
}

interface RefreshRotation {
  token_hash: string;
  next_hash: string;
  client_id: string;
  at: string;
}

type RotatedRefresh = GrantRow & { next_hash: string };

/**
 * One statement per batch of exchanges: a code is consumed only if every check passes, and in the same statement its
 * grant and first refresh token are created and the code names its grant, so a replay can always find what to revoke.
 * The batch arrives as one array per column (`EXCHANGE_COLUMNS`, in parameter order): Postgres then knows how many
 * rows `unnest` yields and finds each code by its key. Given jsonb_to_recordset (which it always guesses at 100 rows)
 * it hash-joined the batch against every code still unused, a scan of the whole table per batch. Exported for the
 * test that pins its plan.
 */
export const EXCHANGE_COLUMNS = [
  'code_hash', 'grant_id', 'kind', 'client_id', 'environment_id', 'redirect_uri', 'code_challenge', 'refresh_hash', 'at', 'grant_expires_at',
] as const satisfies ReadonlyArray<keyof CodeExchange>;

export const EXCHANGE_CODES = `
WITH input AS MATERIALIZED (
  -- In key order, as the codes are then locked: two batches holding the same codes (a client sending them twice) in
  -- opposite orders locked them crosswise, and Postgres failed one batch, every exchange in it, as a deadlock.
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                       $9::timestamptz[], $10::timestamptz[])
    AS x(code_hash, grant_id, kind, client_id, environment_id, redirect_uri, code_challenge, refresh_hash, at, grant_expires_at)
   ORDER BY code_hash
), sessions AS MATERIALIZED (
  -- The authorizing page sessions, held (FOR SHARE) until this statement commits: a browser logout revokes them first,
  -- so it either waits for this exchange and then revokes the grant it made, or this exchange waits for the logout
  -- and finds them revoked. Without the hold, a grant made while a logout ran was missed by it.
  -- In id order, as the logout takes them: a batch holding codes of two sessions of one browser cannot deadlock with it.
  -- Found by key and held whether live or not; \`consumed\` reads revoked_at from here. With \`revoked_at IS NULL\` in
  -- this WHERE, Postgres at times read them through the partial index of live sessions instead, all of it, whenever
  -- the statistics said few were live (after a wave of logouts): test/identity/token-exchange-plan.test.ts.
  SELECT s.id, s.revoked_at FROM browser_sessions s
   WHERE s.id IN (SELECT c.session_id FROM oauth_codes c JOIN input ON c.code_hash = input.code_hash)
   ORDER BY s.id
   FOR SHARE OF s
), consumed AS (
  UPDATE oauth_codes c SET used_at = input.at, grant_id = input.grant_id
  FROM input
  WHERE c.code_hash = input.code_hash AND c.used_at IS NULL AND c.client_id = input.client_id
    AND c.redirect_uri = input.redirect_uri AND c.code_challenge = input.code_challenge AND c.expires_at > input.at
    AND (c.session_id IS NULL OR c.session_id IN (SELECT id FROM sessions WHERE revoked_at IS NULL))
  RETURNING input.grant_id, input.kind, input.client_id, input.environment_id, input.refresh_hash, input.at,
    input.grant_expires_at, c.scopes, c.nonce, c.account_id, c.account_epoch, c.browser_id, c.auth_time
), grant_rows AS (
  INSERT INTO oauth_grants (id, kind, client_id, account_id, account_epoch, browser_id, environment_id, scopes, created_at, last_used_at, expires_at)
  SELECT grant_id, kind, client_id, account_id, account_epoch, browser_id, environment_id, scopes, at, at, grant_expires_at FROM consumed
), refresh_rows AS (
  INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
  SELECT refresh_hash, grant_id, 1, at FROM consumed WHERE refresh_hash IS NOT NULL
)
SELECT grant_id, scopes, nonce, account_id, account_epoch, browser_id, auth_time,
  -- The account's live CLI sign-ins before this batch (its own inserts are not visible to the statement), counted up to
  -- the cap through the partial index of live grants: a person holds a few, so this reads a few index entries.
  CASE WHEN kind = 'cli' THEN (
    SELECT count(*) FROM (
      SELECT 1 FROM oauth_grants g
       WHERE g.account_id = consumed.account_id AND g.kind = 'cli' AND g.revoked_at IS NULL AND g.expires_at > consumed.at
       LIMIT ${LIVE_SESSION_CAPS.cli}) AS live
  ) END AS cli_live_before
FROM consumed`;

/**
 * One statement per batch of refresh rotations, the batch as one array per column (`ROTATION_COLUMNS`, in parameter
 * order). Spending a refresh token and storing its successor is one statement: a failure leaves the old one unspent,
 * so the client's retry is a retry, not a reuse. The presented tokens are looked up by key first (`found`, kept apart
 * from the rest of the plan): left to join the batch, the tokens and their grants in one go, Postgres would at times
 * start from the grants (every live one, hash-joined on client) and only then find the tokens. Exported for the test
 * of its locking.
 */
export const ROTATION_COLUMNS = ['token_hash', 'next_hash', 'client_id', 'at'] as const satisfies ReadonlyArray<keyof RefreshRotation>;

export const ROTATE_REFRESH_TOKENS = `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS x(token_hash, next_hash, client_id, at)
), found AS MATERIALIZED (
  -- In key order, as the tokens are then locked (see EXCHANGE_CODES: batches holding the same tokens crosswise deadlock).
  SELECT input.*, t.grant_id FROM input JOIN oauth_refresh_tokens t ON t.token_hash = input.token_hash WHERE t.used_at IS NULL
   ORDER BY input.token_hash
), spent AS (
  UPDATE oauth_refresh_tokens t SET used_at = found.at
  FROM found
  WHERE t.token_hash = found.token_hash AND t.used_at IS NULL
    -- The grant read by a scalar subquery on its key, always a primary-key probe. Joined with \`revoked_at IS NULL\`, it
    -- was at times read through the partial index of live grants, all of it for every token, whenever the statistics
    -- said few sign-ins were live (after a wave of sign-outs): test/identity/token-rotation-plan.test.ts.
    AND (SELECT g.client_id = found.client_id AND g.revoked_at IS NULL AND g.expires_at > found.at FROM oauth_grants g WHERE g.id = found.grant_id)
  RETURNING t.token_hash, t.grant_id, t.generation, found.next_hash, found.at
), stored AS (
  INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
  SELECT next_hash, grant_id, generation + 1, at FROM spent
), touched AS (
  UPDATE oauth_grants g SET last_used_at = spent.at FROM spent WHERE g.id = spent.grant_id
)
SELECT g.*, spent.next_hash FROM spent JOIN oauth_grants g ON g.id = spent.grant_id`;

/**
 * A refresh token presented again within the reuse grace after its rotation, for a reply that was lost (RFC 9700
 * 4.14.2): answered like a rotation only while the successor that reply carried was never used, by a rotation or by an
 * earlier retry. In one statement, so of racing retries exactly one replaces it: the successor is spent (`used_at`, and
 * `superseded_at` so that it never earns a grace itself) and a new token of its generation stored, so the sign-in
 * still holds one live refresh token. The only token of the next generation is the successor; a second one means a
 * retry was answered already. Locks that successor, then the grant, as a rotation of it would: no new lock order.
 * Only on the refused path, after a rotation found the token spent, so it is not batched. Parameters: presented hash,
 * new hash, client, time, the grace's start, and the request's scopes (jsonb) or null.
 */
const RETRY_WITHIN_GRACE = `
WITH presented AS MATERIALIZED (
  -- The grant by a scalar subquery on its key, as in ROTATE_REFRESH_TOKENS.
  SELECT t.grant_id, t.generation FROM oauth_refresh_tokens t
   WHERE t.token_hash = $1 AND t.used_at > $5::timestamptz AND t.superseded_at IS NULL
     AND (SELECT g.client_id = $3 AND g.revoked_at IS NULL AND g.expires_at > $4::timestamptz
                 AND ($6::jsonb IS NULL OR (g.scopes @> $6::jsonb AND $6::jsonb @> g.scopes))
            FROM oauth_grants g WHERE g.id = t.grant_id)
), superseded AS (
  UPDATE oauth_refresh_tokens s SET used_at = $4::timestamptz, superseded_at = $4::timestamptz
  FROM presented p
  WHERE s.grant_id = p.grant_id AND s.generation = p.generation + 1 AND s.used_at IS NULL
    AND NOT EXISTS (SELECT 1 FROM oauth_refresh_tokens o
                     WHERE o.grant_id = p.grant_id AND o.generation = p.generation + 1 AND o.token_hash <> s.token_hash)
  RETURNING s.grant_id, s.generation
), stored AS (
  INSERT INTO oauth_refresh_tokens (token_hash, grant_id, generation, created_at)
  SELECT $2, grant_id, generation, $4::timestamptz FROM superseded
), touched AS (
  UPDATE oauth_grants g SET last_used_at = $4::timestamptz FROM superseded WHERE g.id = superseded.grant_id
)
SELECT g.*, $2::text AS next_hash FROM superseded JOIN oauth_grants g ON g.id = superseded.grant_id`;

/** One column of a batch, as the array parameter `unnest` reads. */
function column<T, K extends keyof T>(rows: readonly T[], key: K): Array<T[K]> {
  return rows.map((row) => row[key]);
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
  readonly #exchangeCodes: StatementBatcher<CodeExchange, ExchangedCode | undefined>;
  readonly #rotateRefreshTokens: StatementBatcher<RefreshRotation, RotatedRefresh | undefined>;
  readonly #revocationListeners: Array<(accountId: string) => void> = [];

  constructor(dependencies: GrantDependencies) {
    this.#d = dependencies;
    const db = dependencies.db;
    this.#insertCodes = new StatementBatcher(async (codes) => {
      await sql`
        INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, nonce, account_id, account_epoch, browser_id, session_id, auth_time, expires_at)
        SELECT code_hash, client_id, redirect_uri, code_challenge, scopes, nonce, account_id, account_epoch, browser_id, session_id, auth_time, expires_at
        FROM jsonb_to_recordset(${JSON.stringify(codes)}::jsonb) AS x(code_hash text, client_id text, redirect_uri text, code_challenge text,
          scopes jsonb, nonce text, account_id text, account_epoch int8, browser_id text, session_id text, auth_time timestamptz, expires_at timestamptz)`.execute(db);
      return codes.map(() => undefined);
    });
    this.#exchangeCodes = new StatementBatcher(async (exchanges) => {
      const { rows } = await db.executeQuery<ExchangedCode>(
        CompiledQuery.raw(EXCHANGE_CODES, EXCHANGE_COLUMNS.map((key) => column(exchanges, key))),
      );
      const byGrant = new Map(rows.map((r) => [r.grant_id, r]));
      await this.#keepCliSignInsCapped(rows);
      return exchanges.map((e) => byGrant.get(e.grant_id));
    });
    this.#rotateRefreshTokens = new StatementBatcher(async (rotations) => {
      const { rows } = await db.executeQuery<RotatedRefresh>(
        CompiledQuery.raw(ROTATE_REFRESH_TOKENS, ROTATION_COLUMNS.map((key) => column(rotations, key))),
      );
      // Keyed by the successor each request brought: if one batch holds the same token twice, the request whose
      // successor was stored is the one that won; the other sees a spent token.
      const byNext = new Map(rows.map((r) => [r.next_hash, r]));
      return rotations.map((r) => byNext.get(r.next_hash));
    });
  }

  /**
   * Other planes end at once what a revoked grant carried (open sockets living on the sign-in), as they do for a raised
   * account epoch: told the account after any of its grants was revoked here (code or refresh-token reuse, the CLI cap,
   * its owner, a stale epoch). The revocation is committed already, so a listener's failure is theirs to handle.
   */
  onRevoked(listener: (accountId: string) => void): void {
    this.#revocationListeners.push(listener);
  }

  /** For the token endpoint's description, which states the grace this server applies. */
  get refreshReuseGraceSeconds(): number {
    return this.#d.refreshReuseGraceSeconds;
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
    /** The page session that authorized it: the exchange is refused once it is revoked (browser logout). */
    sessionId: string;
    /** When the person signed in (the page session's start) if the request named `max_age`, else null (see #idToken). */
    authTime: number | null;
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
      session_id: input.sessionId,
      auth_time: input.authTime === null ? null : new Date(input.authTime).toISOString(),
      expires_at: new Date(now + CODE_TTL_MS).toISOString(),
    });
    return code.token;
  }

  /** `grant_type=authorization_code`: PKCE S256 verified, code consumed once, a grant created and tokens signed. */
  async exchangeCode(input: { client: OidcClient; code: string; redirectUri: string; codeVerifier: string }): Promise<TokenResponse> {
    const now = this.#d.clock.now();
    const codeHash = hashToken(input.code);
    const kind: GrantKind = input.client.kind;
    const grantId = newId('grt');
    const refresh = kind === 'cli' ? newOpaqueToken('rrt') : undefined;
    const ttl = kind === 'cli' ? CLI_GRANT_TTL_MS : ENVIRONMENT_GRANT_TTL_MS;
    const exchanged = await this.#exchangeCodes.submit({
      code_hash: codeHash,
      grant_id: grantId,
      kind,
      client_id: input.client.clientId,
      environment_id: input.client.environmentId,
      redirect_uri: input.redirectUri,
      code_challenge: s256(input.codeVerifier),
      refresh_hash: refresh?.hash ?? null,
      at: new Date(now).toISOString(),
      grant_expires_at: new Date(now + ttl).toISOString(),
    });
    if (!exchanged) throw await this.#refuseExchange(input, codeHash, now);
    const epoch = await this.#d.epochOf(exchanged.account_id);
    if (epoch !== Number(exchanged.account_epoch)) {
      await this.#revoke(grantId, 'account_epoch_stale');
      throw invalidGrant('account_epoch_stale', "the account's devices changed since this authorization");
    }
    const grant: LiveGrant = {
      id: grantId,
      kind,
      clientId: input.client.clientId,
      accountId: exchanged.account_id,
      accountEpoch: epoch,
      deviceId: null,
      browserId: exchanged.browser_id,
      environmentId: input.client.environmentId,
      scopes: exchanged.scopes,
      createdAt: now,
      lastUsedAt: now,
      expiresAt: now + ttl,
    };
    const [access, id] = await Promise.all([
      this.#accessToken(grant),
      exchanged.scopes.includes('openid') ? this.#idToken(grant, input.client, exchanged.nonce, exchanged.auth_time) : undefined,
    ]);
    return {
      access_token: access,
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_TTL_S,
      scope: exchanged.scopes.join(' '),
      ...(id ? { id_token: id } : {}),
      ...(refresh ? { refresh_token: refresh.token } : {}),
    };
  }

  /**
   * Why an exchange did not go through. A code presented with a wrong client, redirect URI or verifier is spent
   * all the same (whoever holds it cannot keep trying); a code presented after it was spent revokes what it produced
   * (RFC 6749 4.1.2).
   */
  async #refuseExchange(input: { client: OidcClient; redirectUri: string; codeVerifier: string }, codeHash: string, now: number): Promise<HttpError> {
    const db = this.#d.db;
    const burnt = await db
      .updateTable('oauth_codes')
      .set({ used_at: new Date(now) })
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
    if (!burnt) {
      const spent = await db
        .selectFrom('oauth_codes as c')
        .leftJoin('browser_sessions as s', 's.id', 'c.session_id')
        .select(['c.grant_id', 'c.session_id', 's.revoked_at as session_revoked_at'])
        .where('c.code_hash', '=', codeHash)
        .executeTakeFirst();
      if (!spent) return invalidGrant('authorization_code_invalid', 'the authorization code is not known');
      if (spent.grant_id) {
        await this.#revoke(spent.grant_id, 'authorization_code_reuse');
        return invalidGrant('authorization_code_reused', 'the authorization code was already used; the grant it produced is revoked');
      }
      // Spent without a grant: by its browser's logout (which spends the codes nobody exchanged yet), or by a refused
      // attempt. The logout's is no reuse, and an honest page racing its own logout must not be told of a replay.
      if (spent.session_id !== null && spent.session_revoked_at !== null) {
        return invalidGrant('authorization_code_invalid', 'the browser that authorized this code has signed out since');
      }
      return invalidGrant('authorization_code_reused', 'the authorization code was already presented once');
    }
    if (burnt.client_id !== input.client.clientId) return invalidGrant('authorization_code_invalid', 'the authorization code was issued to another client');
    if (burnt.session_id !== null) {
      const session = await db.selectFrom('browser_sessions').select('revoked_at').where('id', '=', burnt.session_id).executeTakeFirst();
      if (!session || session.revoked_at !== null) return invalidGrant('authorization_code_invalid', 'the browser that authorized this code has signed out since');
    }
    if (burnt.expires_at.getTime() <= now) return invalidGrant('authorization_code_expired', 'the authorization code has expired');
    if (burnt.redirect_uri !== input.redirectUri) return invalidGrant('redirect_uri_mismatch', 'redirect_uri differs from the one of the authorization request');
    return invalidGrant('pkce_verifier_mismatch', 'code_verifier does not match the code_challenge');
  }

  /**
   * `grant_type=refresh_token` (CLI only): the presented token is spent and a new one issued in the same grant. A
   * spent token presented again means two parties hold the family: the whole grant is revoked (RFC 9700 4.14), save
   * for one retry within the reuse grace of a token whose successor was never used (see RETRY_WITHIN_GRACE).
   */
  /**
   * `scopes`: the refresh request's `scope` (RFC 6749 6), when sent. Only the sign-in's own scopes are accepted: more is
   * `invalid_scope` as the RFC requires, and so is less, since an access token is checked against its grant's scopes
   * (a narrower token would still carry the grant's rights).
   */
  async refresh(input: { client: OidcClient; refreshToken: string; scopes?: readonly string[] | undefined }): Promise<TokenResponse> {
    const { db, clock } = this.#d;
    const now = clock.now();
    const hash = hashToken(input.refreshToken);
    const requested = input.scopes;
    if (requested !== undefined) {
      // Checked before the rotation, which would spend the token: a refused scope must leave the client its token.
      // A grant's scopes never change, so reading them apart from the rotation races with nothing. A token that is
      // unknown, spent or of an ended sign-in is left to the rotation, which names that (and revokes on reuse).
      // The grant's state is checked here rather than in SQL: with `revoked_at IS NULL` in the statement Postgres may
      // read the grant through the partial index of live grants instead of its key (see ROTATE_REFRESH_TOKENS).
      const found = await db
        .selectFrom('oauth_refresh_tokens as t')
        .innerJoin('oauth_grants as g', 'g.id', 't.grant_id')
        .select(['g.scopes', 'g.client_id', 'g.revoked_at', 'g.expires_at'])
        .where('t.token_hash', '=', hash)
        .where('t.used_at', 'is', null)
        .executeTakeFirst();
      const live = found && found.client_id === input.client.clientId && found.revoked_at === null && found.expires_at.getTime() > now ? found : undefined;
      if (live) {
        const beyond = requested.filter((scope) => !live.scopes.includes(scope));
        if (beyond.length > 0) {
          throw new HttpError(400, 'scope_exceeds_grant', `scopes not granted to this sign-in: ${beyond.join(' ')}`, { oauthError: 'invalid_scope' });
        }
        if (live.scopes.some((scope) => !requested.includes(scope))) {
          throw new HttpError(400, 'scope_narrowing_unsupported', `a refresh returns the sign-in's own scopes (${live.scopes.join(' ')}); omit scope or send all of them`, {
            oauthError: 'invalid_scope',
          });
        }
      }
    }
    const next = newOpaqueToken('rrt');
    const rotation = { token_hash: hash, next_hash: next.hash, client_id: input.client.clientId, at: new Date(now).toISOString() };
    // A retry within the grace is tried only once the rotation found the token spent: a fresh token costs nothing more.
    const row = (await this.#rotateRefreshTokens.submit(rotation)) ?? (await this.#retryWithinGrace(rotation, now, requested));
    if (!row) {
      const known = await db
        .selectFrom('oauth_refresh_tokens as t')
        .innerJoin('oauth_grants as g', 'g.id', 't.grant_id')
        .select(['t.used_at', 'g.id', 'g.client_id', 'g.revoked_at', 'g.expires_at'])
        .where('t.token_hash', '=', hash)
        .executeTakeFirst();
      if (!known || known.client_id !== input.client.clientId) throw invalidGrant('refresh_token_invalid', 'the refresh token is not known');
      if (known.revoked_at !== null) throw invalidGrant('grant_revoked', 'this sign-in was revoked');
      if (known.expires_at.getTime() <= now) throw invalidGrant('grant_expired', 'this sign-in has expired; sign in again');
      // Spent, and presented again beyond what the grace forgives (or a token a retry replaced): two parties hold this
      // family. Everything of the sign-in ends (RFC 9700 4.14).
      await this.#revoke(known.id, 'refresh_token_reuse');
      throw invalidGrant('refresh_token_reused', 'the refresh token was already used; every token of this sign-in is revoked');
    }
    const epoch = await this.#d.epochOf(row.account_id);
    if (epoch !== Number(row.account_epoch)) {
      await this.#revoke(row.id, 'account_epoch_stale');
      throw invalidGrant('account_epoch_stale', "the account's devices changed since this sign-in; sign in again");
    }
    const grant = liveGrant(row);
    return {
      access_token: await this.#accessToken(grant),
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_TTL_S,
      scope: grant.scopes.join(' '),
      refresh_token: next.token,
    };
  }

  /** The refresh token of a lost reply, presented again within the grace (see RETRY_WITHIN_GRACE); undefined otherwise. */
  async #retryWithinGrace(rotation: RefreshRotation, now: number, scopes: readonly string[] | undefined): Promise<RotatedRefresh | undefined> {
    const grace = this.#d.refreshReuseGraceSeconds;
    if (grace === 0) return undefined;
    const { rows } = await this.#d.db.executeQuery<RotatedRefresh>(
      CompiledQuery.raw(RETRY_WITHIN_GRACE, [
        rotation.token_hash,
        rotation.next_hash,
        rotation.client_id,
        rotation.at,
        new Date(now - grace * 1000).toISOString(),
        scopes === undefined ? null : JSON.stringify(scopes),
      ]),
    );
    return rows[0];
  }

  /** Records what the person agreed to give this client, so `prompt=none` may answer later without asking. */
  async recordConsent(accountId: string, clientId: string, scopes: readonly string[]): Promise<void> {
    const at = new Date(this.#d.clock.now());
    await this.#d.db
      .insertInto('oauth_consents')
      .values({ account_id: accountId, client_id: clientId, scopes: JSON.stringify(scopes), granted_at: at })
      .onConflict((oc) => oc.columns(['account_id', 'client_id']).doUpdateSet({ scopes: JSON.stringify(scopes), granted_at: at }))
      .execute();
  }

  async hasConsent(accountId: string, clientId: string, scopes: readonly string[]): Promise<boolean> {
    const row = await this.#d.db.selectFrom('oauth_consents').select('scopes').where('account_id', '=', accountId).where('client_id', '=', clientId).executeTakeFirst();
    return row !== undefined && scopes.every((s) => row.scopes.includes(s));
  }

  /**
   * What an `id_token_hint` (OIDC Core 3.1.2.1) says of `accountId`, the person signed in on the browser that asks
   * `client`: `same` when it is an ID token this registry issued to `client` for that person, `other` when for someone
   * else, `invalid` when it is no ID token this registry issued to `client`. Its age does not matter: it names whom the
   * client expects, and a client renews silently after the ID token it holds has expired.
   */
  async idTokenHint(hint: string, client: OidcClient, accountId: string): Promise<'same' | 'other' | 'invalid'> {
    let claims;
    try {
      claims = await this.#d.keys.verifySignature(hint, ID_TOKEN_TYPE);
    } catch {
      return 'invalid';
    }
    if (claims.iss !== this.#d.issuer() || claims.aud !== client.clientId || typeof claims.sub !== 'string') return 'invalid';
    return claims.sub === this.#subjectFor(accountId, client.environmentId) ? 'same' : 'other';
  }

  /** Who an account is to a client: its pairwise actor id in an Environment, the account id elsewhere (the CLI). */
  #subjectFor(accountId: string, environmentId: string | null): string {
    return environmentId === null ? accountId : this.#d.directory.pairwiseActorId(accountId, environmentId);
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
    await this.#d.db.transaction().execute(async (trx) => {
      // Counted and inserted in the account's turn (an advisory lock): of creations racing at the cap exactly the
      // places left are made. Only the account epoch's own count: an older epoch's sessions no longer work.
      await lockAccountSessions(trx, 'desktop', input.accountId);
      const live = await liveGrantsOf(trx, input.accountId, 'desktop', input.accountEpoch, now)
        .select([(eb) => eb.fn.countAll<string>().as('count'), (eb) => eb.fn.min('expires_at').as('first_end')])
        .executeTakeFirstOrThrow();
      const cap = LIVE_SESSION_CAPS.desktop;
      if (Number(live.count) >= cap) {
        throw liveSessionQuotaExceeded(
          'desktop_management_session_quota_exceeded',
          `this account already has ${cap} live desktop management sessions; revoke one (DELETE /v1/account/desktop-management-sessions/{sessionId}) or wait for the oldest to end`,
          retryAfterSeconds(new Date(live.first_end as Date).getTime(), now),
        );
      }
      await trx
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
    });
    return { grant, accessToken: await this.#accessToken(grant, DESKTOP_SESSION_TTL_S) };
  }

  /** A grant that is live now (not revoked, not expired), by id. */
  async live(grantId: string): Promise<LiveGrant | undefined> {
    const row = await this.#d.db.selectFrom('oauth_grants').selectAll().where('id', '=', grantId).executeTakeFirst();
    return row && row.revoked_at === null && row.expires_at.getTime() > this.#d.clock.now() ? liveGrant(row) : undefined;
  }

  /**
   * The caller's live grants of one kind, newest first: those of the account's current epoch only, since a grant of an
   * older one (a device was removed since) no longer works and is no active sign-in.
   */
  async list(accountId: string, kind: GrantKind, accountEpoch: number): Promise<LiveGrant[]> {
    const rows = await liveGrantsOf(this.#d.db, accountId, kind, accountEpoch, this.#d.clock.now()).selectAll().orderBy('created_at', 'desc').execute();
    return rows.map(liveGrant);
  }

  /**
   * Revokes one grant the account owns, with everything issued under it. Undefined when the account owns no such
   * grant (another account's grant is indistinguishable from a missing one); revoking a revoked grant is a no-op.
   */
  async revokeOwned(accountId: string, grantId: string, kind: GrantKind, reason: string): Promise<{ revokedAt: number } | undefined> {
    const { db, clock } = this.#d;
    const owned = db.selectFrom('oauth_grants').select('revoked_at').where('id', '=', grantId).where('account_id', '=', accountId).where('kind', '=', kind);
    // Revoked and answered by one statement, else read back: a revocation that lost the race to another one answers the
    // time stored by the winner, never a clock reading of its own that no row holds.
    const revoked = await db
      .updateTable('oauth_grants')
      .set({ revoked_at: new Date(clock.now()), revoked_reason: reason })
      .where('id', '=', grantId)
      .where('account_id', '=', accountId)
      .where('kind', '=', kind)
      .where('revoked_at', 'is', null)
      .returning('revoked_at')
      .executeTakeFirst();
    if (revoked) this.#revoked(accountId);
    const row = revoked ?? (await owned.executeTakeFirst());
    return row?.revoked_at ? { revokedAt: row.revoked_at.getTime() } : undefined;
  }

  /**
   * Verifies a registry access token for `audience` online: signature, type, issuer and expiry offline, then its
   * grant live and issued under the account's current epoch. Throws 401 with a code naming the failure (the gateway
   * adds the Bearer challenge to every 401 of a bearer operation).
   */
  async verifyAccessToken(token: string, audience: string): Promise<LiveGrant> {
    let sid: unknown;
    try {
      const payload = await this.#d.keys.verify(token, { typ: ACCESS_TOKEN_TYPE, issuer: this.#d.issuer(), audience, clock: this.#d.clock });
      sid = payload.sid;
    } catch {
      throw new HttpError(401, 'access_token_invalid', 'the bearer token is not a valid, unexpired registry access token for this API', { family: 'management' });
    }
    const grant = typeof sid === 'string' ? await this.live(sid) : undefined;
    if (!grant) {
      throw new HttpError(401, 'access_token_revoked', 'the session behind this token was revoked or has ended', { family: 'management' });
    }
    if ((await this.#d.epochOf(grant.accountId)) !== grant.accountEpoch) {
      throw new HttpError(401, 'account_epoch_stale', "the account's devices changed since this token was issued; sign in again", { family: 'account_policy' });
    }
    return grant;
  }

  /**
   * After a batch of exchanges committed: ends the least recently used live CLI sign-ins beyond the cap
   * (LIVE_SESSION_CAPS.cli) of every account the batch brought to it, with their tokens (a refresh then answers
   * `grant_revoked`, an access token `access_token_revoked`). The common exchange pays only the short count in its
   * own statement. A trim runs under the account's lock for the kind and after its batch committed, so each trim sees
   * the grants of every batch that committed before it: batches racing at the cap leave exactly the cap, except two
   * batches in flight at once that each stayed below it alone (several exchanges of one account in each), which leave
   * the excess to the account's next exchange. The exchanges have already spent their codes, so a failed trim must
   * not fail them (a client would retry a spent code and lose the sign-in it just made): the next exchange at the cap
   * trims again.
   */
  async #keepCliSignInsCapped(rows: readonly ExchangedCode[]): Promise<void> {
    const fresh = new Map<string, number>();
    for (const row of rows) if (row.cli_live_before !== null) fresh.set(row.account_id, (fresh.get(row.account_id) ?? 0) + 1);
    const crowded = new Set<string>();
    for (const row of rows) {
      if (row.cli_live_before !== null && Number(row.cli_live_before) + fresh.get(row.account_id)! >= LIVE_SESSION_CAPS.cli) crowded.add(row.account_id);
    }
    for (const accountId of crowded) await this.#endLeastRecentlyUsedCliGrants(accountId);
  }

  async #endLeastRecentlyUsedCliGrants(accountId: string): Promise<void> {
    const at = new Date(this.#d.clock.now());
    try {
      const ended = await this.#d.db.transaction().execute(async (trx) => {
        await lockAccountSessions(trx, 'cli', accountId);
        return trx
          .updateTable('oauth_grants')
          .set({ revoked_at: at, revoked_reason: 'session_cap' })
          .where('id', 'in', (qb) =>
            qb
              .selectFrom('oauth_grants')
              .select('id')
              .where('account_id', '=', accountId)
              .where('kind', '=', 'cli')
              .where('revoked_at', 'is', null)
              .where('expires_at', '>', at)
              .orderBy('last_used_at', 'desc')
              .orderBy('id', 'desc')
              .offset(LIVE_SESSION_CAPS.cli),
          )
          .executeTakeFirst();
      });
      if (ended.numUpdatedRows > 0n) this.#revoked(accountId);
    } catch (error) {
      this.#d.logger.warn({ err: error, accountId }, 'could not end CLI sign-ins beyond the cap; the next sign-in at the cap tries again');
    }
  }

  async #revoke(grantId: string, reason: string): Promise<void> {
    const revoked = await this.#d.db
      .updateTable('oauth_grants')
      .set({ revoked_at: new Date(this.#d.clock.now()), revoked_reason: reason })
      .where('id', '=', grantId)
      .where('revoked_at', 'is', null)
      .returning('account_id')
      .executeTakeFirst();
    if (revoked) this.#revoked(revoked.account_id);
  }

  #revoked(accountId: string): void {
    for (const listener of this.#revocationListeners) {
      try {
        listener(accountId);
      } catch (error) {
        // The revocation committed: the request that made it must not fail for a listener, which re-checks on its own round.
        this.#d.logger.warn({ err: error, accountId }, 'a grant revocation listener failed');
      }
    }
  }

  async #accessToken(grant: LiveGrant, ttl = ACCESS_TOKEN_TTL_S): Promise<string> {
    const environment = grant.kind === 'environment';
    const subject = environment ? this.#d.directory.pairwiseActorId(grant.accountId, grant.environmentId!) : grant.accountId;
    const signed = await this.#d.keys.sign(
      {
        sub: subject,
        sid: grant.id,
        scope: grant.scopes.join(' '),
        // Environments see no account epoch: it changes at the same moment everywhere and would link pairwise ids.
        ...(environment ? {} : { aep: grant.accountEpoch }),
        ...(grant.clientId ? { client_id: grant.clientId } : {}),
        ...(environment ? { env: grant.environmentId! } : {}),
        jti: newId('jti'),
      },
      { typ: ACCESS_TOKEN_TYPE, issuer: this.#d.issuer(), audience: environment ? RUNTIME_AUDIENCE : MANAGEMENT_AUDIENCE, expiresInSeconds: ttl, clock: this.#d.clock },
    );
    return signed.token;
  }

  /**
   * `auth_time` only when the request named `max_age` (OIDC requires it then): the page session's start is the same
   * second in the ID token of every Environment entered from that browser and would link their pairwise subjects.
   */
  async #idToken(grant: LiveGrant, client: OidcClient, nonce: string | null, authTime: Date | null): Promise<string> {
    const signed = await this.#d.keys.sign(
      {
        sub: this.#subjectFor(grant.accountId, grant.kind === 'environment' ? grant.environmentId : null),
        azp: client.clientId,
        ...(nonce ? { nonce } : {}),
        ...(authTime ? { auth_time: Math.floor(authTime.getTime() / 1000) } : {}),
      },
      { typ: ID_TOKEN_TYPE, issuer: this.#d.issuer(), audience: client.clientId, expiresInSeconds: ID_TOKEN_TTL_S, clock: this.#d.clock },
    );
    return signed.token;
  }
}
