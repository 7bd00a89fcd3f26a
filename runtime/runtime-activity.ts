import type { Clock } from '../actors/clock.js';
import type { RuntimeSessionStatus } from '../machines/runtime-session/runtime-session.machine.js';
import { KeyedListeners } from './keyed-listeners.js';

export type ActivityReason = 'connected' | 'activated' | 'superseded' | 'lease_lapsed' | 'released' | 'idle_expired' | 'browser_logout';

/** What a session's sockets are told; the control channel forwards these as they are. */
export type RuntimeActivityEvent =
  | {
      readonly type: 'session.activity';
      readonly sessionId: string;
      readonly status: RuntimeSessionStatus;
      readonly leaseVersion: number | null;
      readonly reason: ActivityReason;
      readonly at: string;
    }
  | { readonly type: 'browser.signed_out'; readonly sessionId: string; readonly at: string };

/**
 * Where an activity stands in the session's history, so that a listener can drop one that arrives after a newer one
 * (two activations racing: the loser's `active` may be published after the winner's `superseded`). Lease versions
 * only grow: `active` under version v comes after everything of versions below v; leaving a lease at v (superseded
 * by v, or lapsed at v) comes after `active` at v; an ended session comes after everything.
 */
export function activityOrder(status: RuntimeSessionStatus, seenVersion: number): number {
  if (status === 'released' || status === 'revoked') return Number.POSITIVE_INFINITY;
  return 2 * seenVersion + (status === 'active' ? 0 : 1);
}

export type ActivityListener = (event: RuntimeActivityEvent, order: number) => void;

/**
 * This node's sockets, by the Runtime session they serve. Lease and session actors publish here after their commits,
 * so a superseded page learns it at once (its runtime socket is closed, its control channel told).
 */
export class RuntimeActivity {
  readonly #clock: Clock;
  readonly #listeners = new KeyedListeners<ActivityListener>();
  readonly #accountListeners = new KeyedListeners<() => void>();
  #signInChanges = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  subscribe(sessionId: string, listener: ActivityListener): () => void {
    return this.#listeners.add(sessionId, listener);
  }

  /**
   * Listens for the account's sign-ins possibly ending (its epoch was raised: a device signed out or removed; or one of
   * its grants was revoked: a reused authorization code, the owner). Such an end touches no session, so the session
   * listeners do not hear it; each listener checks its own sign-in online.
   */
  subscribeAccount(accountId: string, listener: () => void): () => void {
    return this.#accountListeners.add(accountId, listener);
  }

  /**
   * How many times some account's sign-ins may have ended on this node. A socket checks its sign-in at the upgrade but
   * listens only once open, so a change told in between reaches no listener of it: the socket notes this count before
   * its check and checks again on opening if it moved. One count for every account keeps it free of per-account memory.
   */
  get signInChanges(): number {
    return this.#signInChanges;
  }

  signInsChanged(accountId: string): void {
    this.#signInChanges += 1;
    this.#accountListeners.notify(accountId);
  }

  /** `seenVersion`: the lease version this change concerns (the session's own, or the one that superseded it). */
  sessionChanged(sessionId: string, status: RuntimeSessionStatus, leaseVersion: number | null, reason: ActivityReason, seenVersion: number): void {
    this.#publish(sessionId, { type: 'session.activity', sessionId, status, leaseVersion, reason, at: this.#now() }, activityOrder(status, seenVersion));
  }

  /** `idle_expired`: the platform released a session that stayed without the lease for its idle time. */
  sessionEnded(sessionId: string, reason: 'released' | 'idle_expired'): void {
    this.sessionChanged(sessionId, 'released', null, reason, 0);
  }

  signedOut(sessionId: string): void {
    this.sessionChanged(sessionId, 'revoked', null, 'browser_logout', 0);
    this.#publish(sessionId, { type: 'browser.signed_out', sessionId, at: this.#now() }, Number.POSITIVE_INFINITY);
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  #publish(sessionId: string, event: RuntimeActivityEvent, order: number): void {
    this.#listeners.notify(sessionId, event, order);
  }
}
