import type { Kysely } from 'kysely';
import type { ActorHost } from '../actors/actor-host.js';
import type { Clock } from '../actors/clock.js';
import { RUNTIME_LEASE_KIND, RUNTIME_SESSION_KIND, type LeaseEnded } from '../actors/runtime.actors.js';
import type { LogoutPass } from '../identity/browser-sessions.js';
import type { EnvironmentDirectory } from '../identity/environments.js';
import { newId } from '../identity/ids.js';
import { hasLapsed, openRefusal, type LeaseHolder, type RuntimeLeaseContext, type RuntimeLeaseEmitted } from '../machines/runtime-lease/runtime-lease.machine.js';
import type { PresenceState, RuntimeSessionContext, RuntimeSessionStatus, SessionIdleExpired, SessionLeaseCheck } from '../machines/runtime-session/runtime-session.machine.js';
import type { Database } from '../storage/database.js';
import type { RuntimeCaller } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import { coordinated } from './coordination.js';
import type { EvictionQuota, EvictionTicket } from './eviction-quota.js';
import { KeyedTurns } from './keyed-turns.js';
import type { RuntimeActivity } from './runtime-activity.js';
import { authorizationExpired } from './runtime-tokens.js';

export interface RuntimeSessionState {
  readonly context: RuntimeSessionContext;
  readonly status: RuntimeSessionStatus;
  /** The lease, when this session holds it now. */
  readonly lease: LeaseHolder | null;
}

/** Who a session belongs to: enough to check ownership, whether from a runtime token or a control token. */
export type SessionOwner = Pick<RuntimeCaller, 'accountId' | 'environmentId' | 'origin'>;

interface StoredSession {
  readonly value: RuntimeSessionStatus;
  readonly context: RuntimeSessionContext;
}

export interface RuntimeRole {
  readonly key: string;
  readonly scope: 'all' | 'scoped';
  readonly derived: boolean;
}

export interface RuntimeSessionsOptions {
  readonly host: ActorHost;
  readonly clock: Clock;
  readonly db: Kysely<Database>;
  readonly directory: EnvironmentDirectory;
  readonly quota: EvictionQuota;
  readonly activity: RuntimeActivity;
  readonly leaseTtlMs: number;
  /** Live (not ended) sessions one person may hold in one Environment. */
  readonly sessionsPerEnvironment: number;
  /** How long a session without the lease (standby, superseded) lives before the platform releases it. */
  readonly sessionIdleTtlMs: number;
  readonly warn: (details: Record<string, unknown>, message: string) => void;
  /** Whether the sign-in (OAuth grant) behind a runtime token still holds. */
  readonly signInLive: (grantId: string) => Promise<boolean>;
}

const problem = (status: number, code: string, message: string, family: 'runtime' | 'fencing' = 'runtime'): HttpError => new HttpError(status, code, message, { family });

/**
 * An activation this close to its session's idle deadline is refused as ended: the session would be released while
 * its activation is under way, and could take the lease (evicting the person's live Runtime) after it ended.
 */
const ACTIVATION_MARGIN_MS = 10_000;
const NO_HOLDER: { readonly holder: LeaseHolder | null } = { holder: null };

/** Why a session that is not active cannot make an active-only call. */
const inactive = (status: Exclude<RuntimeSessionStatus, 'active'>, endedReason: string | null = null): HttpError => {
  if (status === 'standby') {
    return problem(409, 'runtime_session_standby', 'this session is on standby: activate it (POST /v1/runtime/session/activate) before this call');
  }
  if (status === 'superseded') {
    return problem(409, 'runtime_session_superseded', 'another Runtime of this person took the lease; activate this one again to take it back', 'fencing');
  }
  if (endedReason === 'idle_expired') {
    return problem(409, 'runtime_session_ended', 'this Runtime session was released after staying idle without the lease; create a new one');
  }
  return problem(409, 'runtime_session_ended', `this Runtime session was ${status}; create a new one`);
};

/** The person already holds as many live sessions in this Environment as they may. */
const sessionQuota = (cap: number, retryAfterS: number): HttpError =>
  new HttpError(
    429,
    'runtime_session_quota_exceeded',
    `this person already has ${cap} live Runtime sessions in this Environment; release one (POST /v1/runtime/session/release) or retry in ${retryAfterS} s, when an idle one is released`,
    { family: 'runtime', headers: { 'retry-after': String(retryAfterS) } },
  );

/** An activation that lost a race with the session's release or revocation. */
const ended = (): HttpError => problem(409, 'runtime_session_ended', 'this Runtime session ended (released or revoked) while it was activated; create a new one');

const signedOut = (): HttpError =>
  authorizationExpired('the sign-in ended (the browser signed out) while this session was being created; sign in to the Environment again');

const sessionNotFound = (): HttpError =>
  problem(404, 'runtime_session_not_found', 'no such Runtime session for this person in this Environment (X-Platform-Runtime-Session)');

/**
 * Runtime sessions and the one lease of each person, over their actors. The lease actor decides who holds the lease;
 * everything that must hold the fence asks it (in memory when the actor is live and committed, through its mailbox
 * otherwise). Session actors keep each page's own record and follow the lease by version.
 */
export class RuntimeSessions {
  readonly #o: RuntimeSessionsOptions;
  /** The persons' lease turns, by account id (see KeyedTurns). */
  readonly #turns = new KeyedTurns();

  constructor(options: RuntimeSessionsOptions) {
    this.#o = options;
  }

  get leaseTtlMs(): number {
    return this.#o.leaseTtlMs;
  }

  /**
   * A new standby session bound to the caller's origin and Environment, if the person holds fewer than
   * `sessionsPerEnvironment` live ones there (else 429 `runtime_session_quota_exceeded`, with Retry-After for when the
   * soonest idle one is released).
   */
  async create(caller: RuntimeCaller): Promise<RuntimeSessionState> {
    const { sessionsPerEnvironment: cap, sessionIdleTtlMs: idleTtlMs } = this.#o;
    // Refused from memory when the lease actor is live and already full: a person retrying at the cap costs no write.
    const committed = this.#o.host.peekCommitted(RUNTIME_LEASE_KIND, caller.accountId)?.context as RuntimeLeaseContext | undefined;
    const known = committed ? openRefusal(committed, caller.environmentId, cap, this.#o.clock.now()) : undefined;
    if (known) throw sessionQuota(cap, this.#retryAfterS(known.freesAt));
    return coordinated(async () => {
      const sessionId = newId('rts');
      // The place first, in the person's lease actor (its mailbox orders racing creations): a session that fails to be
      // created after it holds a place for at most its idle time.
      const opened = await this.#o.host.send(RUNTIME_LEASE_KIND, caller.accountId, {
        type: 'lease.open',
        sessionId,
        environmentId: caller.environmentId,
        cap,
        idleTtlMs,
      });
      const answer = opened.emitted[0] as Extract<RuntimeLeaseEmitted, { type: 'lease.opened' | 'lease.open_refused' }>;
      if (answer.type === 'lease.open_refused') throw sessionQuota(cap, this.#retryAfterS(answer.freesAt));
      const at = this.#o.clock.now();
      // The index row first: a session logout cannot find must never exist (an orphan row is harmless).
      if (caller.browserId !== null) {
        await this.#o.db.insertInto('runtime_session_browsers').values({ browser_id: caller.browserId, session_id: sessionId, created_at: new Date(at) }).execute();
      }
      const reply = await this.#o.host.send(RUNTIME_SESSION_KIND, sessionId, {
        type: 'session.create',
        accountId: caller.accountId,
        actorId: caller.actorId,
        environmentId: caller.environmentId,
        origin: caller.origin,
        browserId: caller.browserId,
        idleTtlMs,
      });
      if (!(await this.#o.signInLive(caller.grantId))) {
        // The sign-in ended while this creation ran (a browser logout): the logout may have looked for the browser's
        // sessions before this one existed. It looks again after it revoked the sign-in, so one of the two sees the
        // other: this check, made after the session exists, or the logout's second look, made after this check.
        await this.#revoke(caller.accountId, sessionId, 'browser_logout');
        this.#forgetBrowser(sessionId);
        throw signedOut();
      }
      return { context: reply.snapshot.context as RuntimeSessionContext, status: 'standby', lease: null };
    });
  }

  /**
   * The caller's session: 404 unless it exists and belongs to this person, Environment and origin (a session of
   * someone else is indistinguishable from none). Ended sessions are answered with their status, not refused here.
   */
  async session(caller: SessionOwner, sessionId: string): Promise<RuntimeSessionState> {
    if (!/^rts_[0-9a-hjkmnp-tv-z]{26}$/.test(sessionId)) throw sessionNotFound();
    return coordinated(async () => {
      const stored = await this.#storedSession(sessionId);
      const context = stored?.context;
      if (
        stored === undefined ||
        context === undefined ||
        context.accountId !== caller.accountId ||
        context.environmentId !== caller.environmentId ||
        context.origin !== caller.origin
      ) {
        throw sessionNotFound();
      }
      return this.#state(stored, await this.#leaseContext(caller.accountId));
    });
  }

  /** A session that has not ended: released and revoked sessions answer 409 `runtime_session_ended`. */
  async liveSession(caller: SessionOwner, sessionId: string): Promise<RuntimeSessionState> {
    const state = await this.session(caller, sessionId);
    if (state.status === 'released' || state.status === 'revoked') throw inactive(state.status, state.context.endedReason);
    return state;
  }

  /**
   * An active session, for the reads the spec keeps from the others (the control token is the only read a standby or
   * superseded session has): any other state answers 409 with its code, which tells the page its state all the same.
   */
  async activeSession(caller: SessionOwner, sessionId: string): Promise<RuntimeSessionState> {
    const state = await this.session(caller, sessionId);
    if (state.status !== 'active') throw inactive(state.status);
    return state;
  }

  /**
   * Takes the person's lease for this session, evicting the session that held it (it becomes superseded). Activating
   * the holder again returns its current lease. Over the eviction quota: 429 before the session or lease actor is
   * read or written.
   */
  async activate(caller: RuntimeCaller, sessionId: string): Promise<RuntimeSessionState> {
    const ticket = this.#o.quota.admit(caller.accountId, sessionId);
    try {
      // In the person's turn: a fenced write under way (holdLease) commits before the lease moves.
      return await this.#turns.run(caller.accountId, () => this.#activate(caller, sessionId, ticket));
    } finally {
      // Refused, or the lease actor never answered: the reservation is returned (a no-op once settled).
      ticket.cancel();
    }
  }

  async #activate(caller: RuntimeCaller, sessionId: string, ticket: EvictionTicket): Promise<RuntimeSessionState> {
    const { context: before } = await this.liveSession(caller, sessionId);
    const idleUntil = before.idleUntil ?? null;
    if (idleUntil !== null && idleUntil - this.#o.clock.now() < ACTIVATION_MARGIN_MS) {
      throw problem(409, 'runtime_session_ended', 'this Runtime session is being released after staying idle without the lease; create a new one');
    }
    return await coordinated(async () => {
      const reply = await this.#o.host.send(RUNTIME_LEASE_KIND, caller.accountId, {
        type: 'lease.acquire',
        sessionId,
        leaseId: newId('lse'),
        ttlMs: this.#o.leaseTtlMs,
      });
      const answer = reply.emitted[0] as Extract<RuntimeLeaseEmitted, { type: 'lease.granted' | 'lease.refused' }>;
      // Released or revoked after the check above: the lease stays where it is.
      if (answer.type === 'lease.refused') throw ended();
      const granted = answer;
      ticket.settle(sessionId, granted.evicted !== null);
      const activated = await this.#o.host.send(RUNTIME_SESSION_KIND, sessionId, {
        type: 'session.activated',
        leaseId: granted.holder.leaseId,
        version: granted.holder.version,
      });
      const context = activated.snapshot.context as RuntimeSessionContext;
      // It ended right after the lease was granted: ended is what it is. A release frees that lease itself; an idle
      // release does too (its effect), which this repeats in case that effect was lost with a crash.
      if (context.endedAt !== null) {
        if (context.endedReason === 'idle_expired') await this.#o.host.send(RUNTIME_LEASE_KIND, caller.accountId, { type: 'lease.release', sessionId });
        throw ended();
      }
      this.#o.activity.sessionChanged(sessionId, 'active', granted.holder.version, 'activated', granted.holder.version);
      return { context, status: 'active', lease: granted.holder };
    });
  }

  /**
   * Enters the person's turn and checks there that the session holds the lease it claims (`requireLease`); the
   * returned function ends the turn. For writes the lease fences outside the actors (Plugin settings): entered once
   * the write holds its connection and locks, ended after its commit, so no activation moves the lease between the
   * check and the commit (a page superseded while it waited is refused; the next holder reads after the write), and an
   * activation waits only for the write's last statements.
   */
  async holdLease(caller: SessionOwner, sessionId: string, lease: { readonly leaseId: string; readonly version: number } | undefined): Promise<() => void> {
    const leave = await this.#turns.enter(caller.accountId);
    try {
      await this.requireLease(caller, sessionId, lease);
      return leave;
    } catch (error) {
      leave();
      throw error;
    }
  }

  /** Ends the session; its lease (if it holds it) is freed without a successor. Releasing twice is a no-op. */
  async release(caller: RuntimeCaller, sessionId: string): Promise<RuntimeSessionState> {
    const state = await this.session(caller, sessionId);
    if (state.status === 'released' || state.status === 'revoked') return state;
    return coordinated(async () => {
      await this.#o.host.send(RUNTIME_LEASE_KIND, caller.accountId, { type: 'lease.release', sessionId });
      const reply = await this.#o.host.send(RUNTIME_SESSION_KIND, sessionId, { type: 'session.release' });
      this.#o.activity.sessionEnded(sessionId, 'released');
      this.#forgetBrowser(sessionId);
      return { context: reply.snapshot.context as RuntimeSessionContext, status: 'released', lease: null };
    });
  }

  /**
   * The fence of active-only calls: the session must be the caller's, alive, and hold the person's lease with exactly
   * this id and version. Renews the lease when a third of its time has passed, so a Runtime in use keeps it. A call
   * without lease claims (`lease` undefined) learns why it has none: standby or superseded, or 400 when the session
   * is active and the claims were merely left out. A standby or superseded session gets its state's code whatever it
   * claims.
   */
  async requireLease(caller: SessionOwner, sessionId: string, lease: { readonly leaseId: string; readonly version: number } | undefined): Promise<RuntimeSessionState> {
    const state = await this.liveSession(caller, sessionId);
    const holder = state.lease;
    if (lease && holder && holder.leaseId === lease.leaseId && holder.version === lease.version) {
      this.#renewIfDue(caller.accountId, holder);
      return state;
    }
    // A lapsed lease leaves its session on standby, so its old claims hear that (the spec's code for a standby session).
    if (state.status !== 'active') throw inactive(state.status);
    if (lease === undefined) {
      throw new HttpError(400, 'runtime_lease_required', 'send the lease of this active session: X-Platform-Runtime-Lease and X-Platform-Runtime-Lease-Version', { family: 'runtime' });
    }
    throw problem(409, 'runtime_lease_stale', 'this lease is no longer current (it ended, lapsed, or was renewed under a newer version); activate again', 'fencing');
  }

  /** Sets what the person shows others in the Environment (ephemeral: see the session kind); the caller has checked the fence. */
  presence(sessionId: string, state: PresenceState): Promise<unknown> {
    return this.#o.host.send(RUNTIME_SESSION_KIND, sessionId, { type: 'session.presence', state });
  }

  /** The roles the caller has in its Environment, and the catalog of roles there. */
  async roles(caller: RuntimeCaller): Promise<{ environmentRoles: string[]; environmentRoleCatalog: RuntimeRole[] }> {
    const environment = await coordinated(() => this.#o.directory.environment(caller.environmentId));
    // The derived admin role of the Environment's owner, scoped to this Environment; platform-managed roles join here.
    const catalog: RuntimeRole[] = [{ key: 'admin', scope: 'scoped', derived: true }];
    return { environmentRoles: environment?.ownerAccountId === caller.accountId ? ['admin'] : [], environmentRoleCatalog: catalog };
  }

  /** Revokes a session: its place and any lease it holds go first, then the session ends; its sockets are told. */
  async #revoke(accountId: string, sessionId: string, reason: string): Promise<void> {
    await this.#o.host.send(RUNTIME_LEASE_KIND, accountId, { type: 'lease.release', sessionId });
    await this.#o.host.send(RUNTIME_SESSION_KIND, sessionId, { type: 'session.revoke', reason });
    this.#o.activity.signedOut(sessionId);
  }

  /**
   * Browser SSO logout: every Runtime session opened in that browser is revoked, and its lease freed. Called twice by a
   * logout (see BrowserSessions.onLogout): `before` its sign-ins end, and `after`.
   */
  async revokeBrowser(browserId: string, pass: LogoutPass): Promise<number> {
    const rows = await this.#o.db.selectFrom('runtime_session_browsers').select('session_id').where('browser_id', '=', browserId).execute();
    // Every session is tried even when one fails, so a retried logout has only the failed ones left to do.
    const outcomes = await Promise.allSettled(
      rows.map(async ({ session_id: sessionId }) => {
        const context = (await this.#storedSession(sessionId))?.context;
        if (!context) return 'unborn' as const;
        if (context.endedAt !== null) return false;
        await this.#revoke(context.accountId, sessionId, 'browser_logout');
        return true;
      }),
    );
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) throw failed.reason;
    // Ended sessions need no index: a later logout of the same browser has nothing to find there. Before the sign-ins
    // end, only the rows of sessions this pass dealt with go: one not created yet (however long its creation takes), or
    // written since the rows were read, stays for the second look. After, every row goes, since a creation still under
    // way then checks its sign-in once its session exists and finds it ended (and the rows of creations that failed,
    // or of retired sessions, go with them).
    let rowsGone = this.#o.db.deleteFrom('runtime_session_browsers').where('browser_id', '=', browserId);
    if (pass === 'before') {
      const handled = rows.map((r) => r.session_id).filter((_, i) => (outcomes[i] as PromiseFulfilledResult<boolean | 'unborn'>).value !== 'unborn');
      if (handled.length === 0) return 0;
      rowsGone = rowsGone.where('session_id', 'in', handled);
    }
    await rowsGone.execute();
    return outcomes.filter((o) => o.status === 'fulfilled' && o.value === true).length;
  }

  /**
   * After a session committed its release for idleness: the lease actor forgets it (it no longer counts against the
   * cap, and cannot take the lease any more), and its control channel is told.
   */
  readonly idleExpired = (expired: SessionIdleExpired): void => {
    this.#o.activity.sessionEnded(expired.sessionId, 'idle_expired');
    this.#forgetBrowser(expired.sessionId);
    this.#o.host.send(RUNTIME_LEASE_KIND, expired.accountId, { type: 'lease.release', sessionId: expired.sessionId }).catch((err: unknown) => {
      this.#o.warn({ err, sessionId: expired.sessionId }, 'lease actor not told of an idle release (its entry lapses on its own)');
    });
  };

  /**
   * An ended session needs no row in the browser index: a logout has nothing to do for it. Without this the index
   * kept a row for every session ever opened in a browser. Best effort: a row left behind is harmless (a logout skips
   * ended sessions, then removes the browser's rows).
   */
  #forgetBrowser(sessionId: string): void {
    this.#o.db
      .deleteFrom('runtime_session_browsers')
      .where('session_id', '=', sessionId)
      .execute()
      .catch((err: unknown) => this.#o.warn({ err, sessionId }, 'browser index row of an ended session not removed (harmless)'));
  }

  /** After the lease actor committed the end of a holding: the session learns it, its sockets are told. */
  readonly leaseEnded = (ended: LeaseEnded): void => {
    const { holder, reason, version, accountId } = ended;
    if (reason === 'superseded') {
      this.#o.activity.sessionChanged(holder.sessionId, 'superseded', version, 'superseded', version);
      this.#o.host.send(RUNTIME_SESSION_KIND, holder.sessionId, { type: 'session.superseded', version }).catch((err: unknown) => {
        this.#o.warn({ err, sessionId: holder.sessionId }, 'superseded session not told (the lease actor still fences it)');
      });
      return;
    }
    this.#o.quota.leaseEnded(accountId);
    if (reason === 'lapsed') {
      this.#o.activity.sessionChanged(holder.sessionId, 'standby', null, 'lease_lapsed', holder.version);
      this.#o.host.send(RUNTIME_SESSION_KIND, holder.sessionId, { type: 'session.lease_lapsed', version: holder.version }).catch((err: unknown) => {
        this.#o.warn({ err, sessionId: holder.sessionId }, 'session not told its lease lapsed (the lease actor still fences it)');
      });
    }
  };

  /**
   * After an active session committed its periodic look at the lease: tells it what it missed if the lease actor no
   * longer holds its lease for it (a notice lost with a crash or a failed send, or a release that freed the lease and
   * never ended the session). The lease actor decides; the session follows by version as it does every notice, so one
   * that crossed a newer activation is ignored. A failure waits for the next look.
   */
  readonly leaseCheck = (check: SessionLeaseCheck): void => {
    const told = async (): Promise<void> => {
      const lease = await this.#leaseContext(check.accountId);
      const holder = this.#unlapsed(lease).holder;
      if (holder?.sessionId === check.sessionId && holder.leaseId === check.leaseId && holder.version === check.version) return;
      const notice =
        lease.version > check.version
          ? { type: 'session.superseded', version: lease.version }
          : { type: 'session.lease_lapsed', version: check.version };
      this.#o.warn({ sessionId: check.sessionId, notice: notice.type }, 'an active session had not heard that it lost the lease; told now');
      await this.#o.host.send(RUNTIME_SESSION_KIND, check.sessionId, notice);
    };
    told().catch((err: unknown) => this.#o.warn({ err, sessionId: check.sessionId }, 'lease check of an active session failed (it looks again later)'));
  };

  /**
   * How a session ended, when its actor is in memory with its end committed: `released` or `revoked`; undefined while
   * it has not ended, or when it is not in memory to say so. For a socket whose session lost the lease with nobody
   * taking it: an ended session is told its end (4410, 4401), not a lapse (4412), which would send the page to activate
   * again.
   */
  committedEnd(sessionId: string): 'released' | 'revoked' | undefined {
    const value = this.#o.host.peekCommitted(RUNTIME_SESSION_KIND, sessionId)?.value;
    return value === 'released' || value === 'revoked' ? value : undefined;
  }

  /** The current lease holder of a person, from the lease actor. */
  async leaseHolder(accountId: string): Promise<LeaseHolder | null> {
    return (this.committedLeaseHolder(accountId) ?? this.#unlapsed(await this.#leaseContext(accountId))).holder;
  }

  /**
   * The lease actor's committed context when it is in memory with nothing pending, as it is while the person's socket
   * is open; a per-message check then costs no promise. Otherwise undefined: ask `leaseHolder`.
   */
  committedLeaseHolder(accountId: string): { readonly holder: LeaseHolder | null } | undefined {
    const context = this.#o.host.peekCommitted(RUNTIME_LEASE_KIND, accountId)?.context as RuntimeLeaseContext | undefined;
    return context && this.#unlapsed(context);
  }

  /**
   * The lease as of now: past its deadline it has lapsed, whether or not the lease actor has had its timer yet (a
   * passivated actor's timer is found by a poll; an outage delays it longer), so a fence never passes on a lapsed lease.
   */
  #unlapsed(context: RuntimeLeaseContext): { readonly holder: LeaseHolder | null } {
    return hasLapsed(context.holder, this.#o.clock.now()) ? NO_HOLDER : context;
  }

  /** Keeps the lease of a Runtime with an open socket; false when the lease is no longer this session's. */
  async renew(accountId: string, holder: { sessionId: string; leaseId: string }): Promise<boolean> {
    const reply = await this.#o.host.send(RUNTIME_LEASE_KIND, accountId, { type: 'lease.renew', sessionId: holder.sessionId, leaseId: holder.leaseId, ttlMs: this.#o.leaseTtlMs });
    return (reply.emitted[0] as RuntimeLeaseEmitted | undefined)?.type === 'lease.renewed';
  }

  /** Seconds until `freesAt` (at least 1); the whole idle time when no session is on its way out. */
  #retryAfterS(freesAt: number | null): number {
    const wait = freesAt === null ? this.#o.sessionIdleTtlMs : freesAt - this.#o.clock.now();
    return Math.max(1, Math.ceil(wait / 1000));
  }

  #renewIfDue(accountId: string, holder: LeaseHolder): void {
    if (holder.expiresAt - this.#o.clock.now() > (this.#o.leaseTtlMs * 2) / 3) return;
    this.renew(accountId, holder).catch((err: unknown) => this.#o.warn({ err, accountId }, 'lease renewal failed'));
  }

  async #storedSession(sessionId: string): Promise<StoredSession | undefined> {
    const snapshot =
      this.#o.host.peekCommitted(RUNTIME_SESSION_KIND, sessionId) ??
      (await this.#o.host.send(RUNTIME_SESSION_KIND, sessionId, { type: 'session.read' })).snapshot;
    const value = snapshot.value as RuntimeSessionStatus | 'unborn';
    return value === 'unborn' ? undefined : { value, context: snapshot.context as RuntimeSessionContext };
  }

  async #leaseContext(accountId: string): Promise<RuntimeLeaseContext> {
    const snapshot =
      this.#o.host.peekCommitted(RUNTIME_LEASE_KIND, accountId) ?? (await this.#o.host.send(RUNTIME_LEASE_KIND, accountId, { type: 'lease.read' })).snapshot;
    return snapshot.context as RuntimeLeaseContext;
  }

  /** The lease actor is the authority: a session whose own record says active but that is not the holder has lost it. */
  #state(session: StoredSession, lease: RuntimeLeaseContext): RuntimeSessionState {
    const { context, value } = session;
    if (value === 'released' || value === 'revoked') return { context, status: value, lease: null };
    const holder = this.#unlapsed(lease).holder;
    if (holder?.sessionId === context.sessionId) return { context, status: 'active', lease: holder };
    if (value === 'active') return { context, status: holder ? 'superseded' : 'standby', lease: null };
    return { context, status: value, lease: null };
  }
}
