import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database } from '../storage/database.js';
import { readCookie, setCookie } from '../transport/http/cookies.js';
import { idPattern, newId } from './ids.js';
import { LIVE_SESSION_CAPS, lockAccountSessions } from './live-session-caps.js';
import { hashToken, newOpaqueToken, sameSecret, type RegistrySecrets } from './opaque-tokens.js';

export const PAGE_COOKIE = '__Host-registry_page';
export const CONSOLE_COOKIE = '__Host-registry_console';
/** Names the browser, so that browser SSO logout can end every session that lives in it. Not a credential. */
export const BROWSER_COOKIE = '__Host-registry_browser';

export const PAGE_SESSION_TTL_MS = 12 * 3600_000;
export const CONSOLE_SESSION_TTL_MS = 8 * 3600_000;
const BROWSER_COOKIE_MAX_AGE_S = 400 * 24 * 3600;
export const CSRF_SECRET = 'csrf';

export type BrowserSessionKind = 'page' | 'console';

/**
 * Whether the browser holds sessions (live or ended) of accounts other than `accountId`: the least and the greatest
 * account among them, each one probe of the index by (browser, account), so its cost does not grow with the account's
 * own sessions in that browser (`account_id <> x` read every one of them). Exported for the test of what it reads.
 */
export function heldByOtherAccounts(browserId: string, accountId: string): RawBuilder<{ held: boolean }> {
  return sql<{ held: boolean }>`
    SELECT coalesce(min(account_id) <> ${accountId} OR max(account_id) <> ${accountId}, false) AS held
      FROM browser_sessions WHERE browser_id = ${browserId}`;
}

/**
 * Locks the browser's live sessions in id order. Through the partial index of live sessions: the ended ones a day of
 * sign-ins leaves in the browser are never read. Exported for the test of what it reads.
 */
/**
 * Revokes the Environment grants authorized in the browser that are still live. Through the partial index of unrevoked
 * Environment grants by (browser, expiry) (migration 0025): ended grants stay 30 days, and a logout read every one of
 * them the browser ever authorized. An expired grant authorizes nothing and is left as it ended. Exported for the test
 * of what it reads.
 */
export function revokeLiveEnvironmentGrantsOfBrowser(trx: Transaction<Database>, browserId: string, reason: string, at: Date) {
  return trx
    .updateTable('oauth_grants')
    .set({ revoked_at: at, revoked_reason: reason })
    .where('browser_id', '=', browserId)
    .where('kind', '=', 'environment')
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', at);
}

/**
 * Spends the browser's codes that could still be exchanged (unused, unexpired: an exchange checks both). Through the
 * index by (browser, expiry) (migration 0026), so it reads the codes of the last minute, not every code the browser was
 * issued that the sweep had not removed (a day after their expiry). Exported for the test of what it reads.
 */
export function spendLiveCodesOfBrowser(trx: Transaction<Database>, browserId: string, at: Date) {
  return trx.updateTable('oauth_codes').set({ used_at: at }).where('browser_id', '=', browserId).where('expires_at', '>', at).where('used_at', 'is', null);
}

export function lockLiveSessionsOfBrowser(trx: Transaction<Database>, browserId: string) {
  return trx.selectFrom('browser_sessions').select('id').where('browser_id', '=', browserId).where('revoked_at', 'is', null).orderBy('id').forUpdate();
}

/** Which pass of a browser logout a listener runs in (see onLogout). */
export type LogoutPass = 'before' | 'after';

export interface BrowserSession {
  readonly id: string;
  readonly kind: BrowserSessionKind;
  readonly browserId: string;
  readonly accountId: string;
  readonly accountEpoch: number;
  readonly deviceId: string | null;
  readonly grantId: string | null;
  /** Console sessions: the scopes of the management grant behind them. */
  readonly grantScopes: readonly string[];
  readonly createdAt: number;
  readonly expiresAt: number;
}

const BROWSER_ID = idPattern('brw');

export type SessionLookup =
  | { readonly status: 'live'; readonly session: BrowserSession }
  | { readonly status: 'absent' | 'ended' | 'epoch_stale' };

/**
 * Registry sessions that live in a browser as HttpOnly cookies: page sessions (made from a device key, used by
 * registry pages such as the OIDC authorization page) and console sessions (exchanged from a management bearer).
 * The cookie holds an opaque secret; Postgres holds its hash, the owner, the account epoch at issue and the browser
 * it belongs to. A console session also names the management grant it came from and dies with it.
 */
export class BrowserSessions {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;
  readonly #logoutListeners: Array<(browserId: string, pass: LogoutPass) => Promise<void>> = [];
  readonly #secrets: RegistrySecrets;

  readonly #epochOf: (accountId: string) => Promise<number>;

  constructor(db: Kysely<Database>, clock: Clock, secrets: RegistrySecrets, epochOf: (accountId: string) => Promise<number>) {
    this.#db = db;
    this.#clock = clock;
    this.#secrets = secrets;
    this.#epochOf = epochOf;
  }

  /**
   * The browser id a request's cookie names, or a fresh one: what `create` is asked to name its session's browser by.
   * The cookie is no credential (`create` decides whether the id is taken).
   */
  browserOf(headers: Readonly<Record<string, string>>): string {
    const existing = readCookie(headers, BROWSER_COOKIE);
    return existing && BROWSER_ID.test(existing) ? existing : newId('brw');
  }

  /**
   * Every browser id a logout request names: the browser of its console session, the one its browser cookie names and
   * the browser of the page session it carries. They differ when sessions were made by requests that carried no
   * browser cookie (a browser's first page and console sessions made at once each name the browser afresh): the
   * browser holds sessions of each, and its logout must end them all. Sorted, so concurrent logouts take them in one
   * order. The browser cookie is no credential (anyone can send any value), so the browser it names counts only when
   * it holds a session of the caller's account: otherwise anyone who learnt a browser's id could log it out.
   */
  async browsersOfLogout(headers: Readonly<Record<string, string>>, consoleBrowserId: string, accountId: string): Promise<string[]> {
    const ids = new Set([consoleBrowserId]);
    const named = readCookie(headers, BROWSER_COOKIE);
    if (named && named !== consoleBrowserId && BROWSER_ID.test(named)) {
      const ours = await this.#db.selectFrom('browser_sessions').select('id').where('browser_id', '=', named).where('account_id', '=', accountId).limit(1).executeTakeFirst();
      if (ours) ids.add(named);
    }
    const page = readCookie(headers, PAGE_COOKIE);
    if (page !== undefined && page.length <= 128) {
      // Ended or not: whatever the page session authorized in this browser (Environment grants) may still be live.
      const row = await this.#db.selectFrom('browser_sessions').select('browser_id').where('secret_hash', '=', hashToken(page)).where('kind', '=', 'page').executeTakeFirst();
      if (row) ids.add(row.browser_id);
    }
    return [...ids].sort();
  }

  async create(
    kind: BrowserSessionKind,
    input: { browserId: string; accountId: string; accountEpoch: number; deviceId?: string; grantId?: string; grantScopes?: readonly string[]; notAfter?: number },
  ): Promise<{ session: BrowserSession; cookie: string; browserCookie: string }> {
    const now = this.#clock.now();
    const ttl = kind === 'page' ? PAGE_SESSION_TTL_MS : CONSOLE_SESSION_TTL_MS;
    const expiresAt = Math.min(now + ttl, input.notAfter ?? Number.POSITIVE_INFINITY);
    const id = newId(kind === 'page' ? 'pgs' : 'cns');
    const secret = newOpaqueToken(kind === 'page' ? 'rps' : 'rcs');
    const browserId = await this.#db.transaction().execute(async (trx) => {
      // The account's creations of this kind take turns (an advisory lock), so racing ones at the cap leave exactly the
      // cap live: each inserts, then ends the account's oldest live sessions beyond it.
      await lockAccountSessions(trx, kind, input.accountId);
      // Anyone may send any browser id: one that holds another account's sessions is not taken, or a stranger who
      // learnt it would make a session of that browser and end everything in it with their own logout.
      const { rows } = await heldByOtherAccounts(input.browserId, input.accountId).execute(trx);
      const browser = rows[0]?.held === true ? newId('brw') : input.browserId;
      await trx
        .insertInto('browser_sessions')
        .values({
          id,
          kind,
          secret_hash: secret.hash,
          browser_id: browser,
          account_id: input.accountId,
          account_epoch: input.accountEpoch,
          device_id: input.deviceId ?? null,
          grant_id: input.grantId ?? null,
          created_at: new Date(now),
          expires_at: new Date(expiresAt),
        })
        .execute();
      await this.#endOldestBeyondCap(trx, kind, input.accountId, now);
      return browser;
    });
    const session: BrowserSession = {
      id,
      kind,
      browserId,
      accountId: input.accountId,
      accountEpoch: input.accountEpoch,
      deviceId: input.deviceId ?? null,
      grantId: input.grantId ?? null,
      grantScopes: input.grantScopes ?? [],
      createdAt: now,
      expiresAt,
    };
    const name = kind === 'page' ? PAGE_COOKIE : CONSOLE_COOKIE;
    // The page session must ride the top-level navigation from an Environment to the authorization page: Lax.
    const cookie = setCookie(name, secret.token, { maxAgeSeconds: Math.floor((expiresAt - now) / 1000), sameSite: kind === 'page' ? 'Lax' : 'Strict' });
    // Planted, or renewed by every session made in the browser: planted once, it lapsed 400 days on however much the
    // browser was in use, and the browser's next session was named afresh, out of reach of a logout made through the
    // sessions it already held.
    const browserCookie = setCookie(BROWSER_COOKIE, browserId, { maxAgeSeconds: BROWSER_COOKIE_MAX_AGE_S, sameSite: 'Lax' });
    return { session, cookie, browserCookie };
  }

  /**
   * Ends the account's oldest live sessions of `kind` beyond its cap (LIVE_SESSION_CAPS), as a logout ends a session:
   * revoked, so its cookie, its CSRF token (derived from its id) and any code it issued but not yet exchanged (the
   * exchange refuses a revoked session) stop working. What it already authorized (Environment grants) lives on, as it
   * does when a session expires. Called under the account's lock of that kind, after the insert.
   */
  async #endOldestBeyondCap(trx: Transaction<Database>, kind: BrowserSessionKind, accountId: string, now: number): Promise<void> {
    const at = new Date(now);
    await trx
      .updateTable('browser_sessions')
      .set({ revoked_at: at, revoked_reason: 'session_cap' })
      .where('id', 'in', (qb) =>
        qb
          .selectFrom('browser_sessions')
          .select('id')
          .where('account_id', '=', accountId)
          .where('kind', '=', kind)
          .where('revoked_at', 'is', null)
          .where('expires_at', '>', at)
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .offset(LIVE_SESSION_CAPS[kind]),
      )
      .execute();
  }

  /**
   * The session named by the request's cookie of that kind, live only when it is not revoked or expired, its grant
   * (if any) is live, and the account epoch has not risen since it began. Otherwise why not: no cookie, or ended.
   */
  async fromRequest(kind: BrowserSessionKind, headers: Readonly<Record<string, string>>): Promise<SessionLookup> {
    const token = readCookie(headers, kind === 'page' ? PAGE_COOKIE : CONSOLE_COOKIE);
    if (token === undefined) return { status: 'absent' };
    if (token.length > 128) return { status: 'ended' };
    const now = new Date(this.#clock.now());
    const row = await this.#db
      .selectFrom('browser_sessions as s')
      .leftJoin('oauth_grants as g', 'g.id', 's.grant_id')
      .select(['s.id', 's.kind', 's.browser_id', 's.account_id', 's.account_epoch', 's.device_id', 's.grant_id', 's.created_at', 's.expires_at', 's.revoked_at', 'g.revoked_at as grant_revoked_at', 'g.expires_at as grant_expires_at', 'g.scopes as grant_scopes'])
      .where('s.secret_hash', '=', hashToken(token))
      .where('s.kind', '=', kind)
      .executeTakeFirst();
    if (!row || row.revoked_at !== null || row.expires_at <= now) return { status: 'ended' };
    if (row.grant_id !== null && (row.grant_revoked_at !== null || row.grant_expires_at === null || row.grant_expires_at <= now)) return { status: 'ended' };
    if ((await this.#epochOf(row.account_id)) !== row.account_epoch) return { status: 'epoch_stale' };
    const session: BrowserSession = {
      id: row.id,
      kind: row.kind,
      browserId: row.browser_id,
      accountId: row.account_id,
      accountEpoch: row.account_epoch,
      deviceId: row.device_id,
      grantId: row.grant_id,
      grantScopes: row.grant_scopes ?? [],
      createdAt: row.created_at.getTime(),
      expiresAt: row.expires_at.getTime(),
    };
    return { status: 'live', session };
  }

  /** The CSRF token of a session: derived, so nothing more is stored, and useless without the session's cookie. */
  csrfToken(sessionId: string): string {
    return this.#secrets.mac(CSRF_SECRET, sessionId);
  }

  checkCsrf(sessionId: string, presented: string | undefined): boolean {
    return presented !== undefined && sameSecret(presented, this.csrfToken(sessionId));
  }

  /**
   * Other planes end what they correlate with a browser when it logs out (the Runtime sessions opened in it), in two
   * passes. `before` runs before the browser's own sessions and grants end: a listener that fails fails the logout, and
   * the browser's retry is still signed in to make it (every step of a logout is idempotent). `after` runs once they
   * ended, for what was made with them while the first pass ran; the browser cannot retry then, so a listener
   * reports its own failures there.
   */
  onLogout(listener: (browserId: string, pass: LogoutPass) => Promise<void>): void {
    this.#logoutListeners.push(listener);
  }

  /**
   * Browser SSO logout: every page and console session of this browser ends, and so do the Environment grants
   * authorized through it (the runtime tokens of that browser) and its unexchanged codes. CLI and desktop grants are
   * not browser-bound and stay.
   */
  async logoutBrowser(browserId: string, reason: string): Promise<{ sessions: number; grants: number }> {
    const at = new Date(this.#clock.now());
    await Promise.all(this.#logoutListeners.map((listener) => listener(browserId, 'before')));
    const ended = await this.#db.transaction().execute(async (trx) => {
      // Locked in id order first, as a code exchange holds them (oauth-grants.ts): the two never wait on each other in a circle.
      await lockLiveSessionsOfBrowser(trx, browserId).execute();
      const sessions = await trx
        .updateTable('browser_sessions')
        .set({ revoked_at: at, revoked_reason: reason })
        .where('browser_id', '=', browserId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      const grants = await revokeLiveEnvironmentGrantsOfBrowser(trx, browserId, reason, at).executeTakeFirst();
      // Codes issued in this browser and not yet exchanged would otherwise mint a grant after the logout.
      await spendLiveCodesOfBrowser(trx, browserId, at).execute();
      return { sessions: Number(sessions.numUpdatedRows), grants: Number(grants.numUpdatedRows) };
    });
    await Promise.all(this.#logoutListeners.map((listener) => listener(browserId, 'after')));
    return ended;
  }
}
