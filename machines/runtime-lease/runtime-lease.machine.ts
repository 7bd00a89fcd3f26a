import { enqueueActions, setup } from 'xstate';

/**
 * The one fenced Runtime lease of a person (keyed by account id: the private principal, never shown to Environments).
 * This actor is the authority on who holds the lease: a session is active exactly while it is the holder here. Its
 * mailbox serialises activations, so two sessions racing to activate always end with one holder and one evicted.
 *
 * The version grows with every grant and never goes back, so a fence (lease id + version) once superseded can never
 * match again. A lease that nobody renews lapses at `expiresAt` (a durable timer), so a closed tab does not keep it.
 *
 * It also keeps the person's live sessions, per Environment, for the cap on them (`lease.open`): its mailbox is the
 * one place where all of a person's sessions meet, so two creations arriving together cannot both take the last
 * place. The session actors are the authority on whether they have ended; this is bookkeeping that heals itself:
 * every entry carries a deadline that is never earlier than its session's own idle deadline, and an entry past it is
 * forgotten even if the notice of its session's end never arrived.
 */
export interface LeaseHolder {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly version: number;
  readonly grantedAt: number;
  readonly expiresAt: number;
}

export interface RuntimeLeaseContext {
  readonly accountId: string;
  readonly holder: LeaseHolder | null;
  /** Highest version ever granted. */
  readonly version: number;
  /**
   * The person's sessions that ended most recently (released or revoked), newest last, at most ENDED_KEPT. An
   * activation checks its session is live before it asks for the lease; a release or logout landing between the two
   * must not let the ended session take the lease (and evict the live one), so it is refused here. Absent in leases
   * stored before it existed: read as empty.
   */
  readonly ended?: readonly string[];
  /**
   * The person's sessions that have not ended, for the cap on live sessions per Environment. Absent in leases stored
   * before the cap existed (read as empty: their sessions are not counted).
   */
  readonly sessions?: readonly LiveSessionEntry[];
}

export interface LiveSessionEntry {
  readonly sessionId: string;
  readonly environmentId: string;
  readonly idleTtlMs: number;
  /**
   * When this entry is forgotten: null while the session holds the lease; otherwise the session's idle deadline as
   * this actor sees it plus IDLE_SLACK_MS (the session hears of its creation and of losing the lease a moment after
   * this actor decided them, so its own deadline is a little later).
   */
  readonly until: number | null;
}

/**
 * How much later than a session's own idle deadline its entry is forgotten. The session's end normally removes the
 * entry at once (its `lease.release`); this only matters when that notice was lost, and keeps the cap a hard one.
 */
export const IDLE_SLACK_MS = 60_000;

/** Far more than the activations one person can have in flight between their session check and their acquire. */
export const ENDED_KEPT = 32;

export type RuntimeLeaseEvent =
  | { readonly type: 'lease.acquire'; readonly sessionId: string; readonly leaseId: string; readonly ttlMs: number; readonly at: number }
  | { readonly type: 'lease.renew'; readonly sessionId: string; readonly leaseId: string; readonly ttlMs: number; readonly at: number }
  /** The session ended (released, or revoked by a logout): its lease, if it holds it, is freed without a successor. */
  | { readonly type: 'lease.release'; readonly sessionId: string; readonly at: number }
  | { readonly type: 'lease.read'; readonly at: number }
  /** A new session asks for a place among the person's live sessions in its Environment (at most `cap`). */
  | {
      readonly type: 'lease.open';
      readonly sessionId: string;
      readonly environmentId: string;
      readonly cap: number;
      readonly idleTtlMs: number;
      readonly at: number;
    }
  | { readonly type: 'timer.due'; readonly name: string; readonly dueAt: number; readonly at: number };

export type LeaseEndReason = 'superseded' | 'released' | 'lapsed';

export type RuntimeLeaseEmitted =
  /** `evicted` is the session that held the lease until now (it is superseded), if any. */
  | { readonly type: 'lease.granted'; readonly holder: LeaseHolder; readonly evicted: LeaseHolder | null }
  | { readonly type: 'lease.renewed'; readonly holder: LeaseHolder }
  | { readonly type: 'lease.not_held'; readonly holder: LeaseHolder | null }
  /** The session asking for the lease has ended: nothing changed. */
  | { readonly type: 'lease.refused'; readonly sessionId: string; readonly reason: 'session_ended' }
  | { readonly type: 'lease.opened'; readonly sessionId: string }
  /** `freesAt`: when the soonest of those sessions reaches its idle deadline; null when none has one. */
  | { readonly type: 'lease.open_refused'; readonly sessionId: string; readonly live: number; readonly freesAt: number | null };

/** Entries still live at `at`: those past their deadline are forgotten. */
function liveEntries(context: RuntimeLeaseContext, at: number): LiveSessionEntry[] {
  return (context.sessions ?? []).filter((entry) => entry.until === null || entry.until > at);
}

/** What `lease.open` would answer now, without asking: whether the Environment's places are all taken. */
export function openRefusal(context: RuntimeLeaseContext, environmentId: string, cap: number, at: number): { live: number; freesAt: number | null } | undefined {
  const here = liveEntries(context, at).filter((entry) => entry.environmentId === environmentId);
  if (here.length < cap) return undefined;
  const deadlines = here.flatMap((entry) => (entry.until === null ? [] : [entry.until - IDLE_SLACK_MS]));
  return { live: here.length, freesAt: deadlines.length > 0 ? Math.min(...deadlines) : null };
}

/** The entries with `sessionId`'s deadline set by `until` (a session missing, as one stored before the cap, is left out). */
function withUntil(entries: readonly LiveSessionEntry[], sessionId: string, until: (entry: LiveSessionEntry) => number | null): LiveSessionEntry[] {
  return entries.map((entry) => (entry.sessionId === sessionId ? { ...entry, until: until(entry) } : entry));
}

const idleFrom = (at: number) => (entry: LiveSessionEntry): number => at + entry.idleTtlMs + IDLE_SLACK_MS;

/**
 * The live entries once the holder's lease has lapsed at `at`, or undefined while it holds. A lease lapses at its
 * deadline, not when its timer is delivered (a passivated actor's timer is found by a poll, an outage delays it):
 * an event arriving in between meets the lapse first, so a late renewal never brings a lapsed lease back.
 */
function afterLapse(context: RuntimeLeaseContext, at: number): LiveSessionEntry[] | undefined {
  if (!hasLapsed(context.holder, at)) return undefined;
  return withUntil(liveEntries(context, at), context.holder!.sessionId, idleFrom(at));
}

/** Whether a holder's lease has lapsed at `at`: at its deadline, the one rule for this actor and for readers of it. */
export function hasLapsed(holder: LeaseHolder | null, at: number): boolean {
  return holder !== null && at >= holder.expiresAt;
}

export const runtimeLeaseMachine = setup({
  types: { context: {} as RuntimeLeaseContext, events: {} as RuntimeLeaseEvent, emitted: {} as RuntimeLeaseEmitted, input: {} as { accountId: string } },
  actions: {
    /** After the commit: tell the session whose lease ended, and its sockets. Provided by the host's runtime kinds. */
    leaseEnded: (_, _params: { accountId: string; holder: LeaseHolder; reason: LeaseEndReason; version: number }) => {},
  },
}).createMachine({
  id: 'runtime-lease',
  context: ({ input }) => ({ accountId: input.accountId, holder: null, version: 0, ended: [] }),
  on: {
    'lease.acquire': {
      actions: enqueueActions(({ context, event, enqueue }) => {
        if (context.ended?.includes(event.sessionId)) {
          enqueue.emit({ type: 'lease.refused', sessionId: event.sessionId, reason: 'session_ended' });
          return;
        }
        const lapsed = afterLapse(context, event.at);
        if (lapsed) {
          enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: context.holder!, reason: 'lapsed', version: context.version } });
        }
        const current = lapsed ? null : context.holder;
        if (current?.sessionId === event.sessionId) {
          // Activating the holder again keeps its fence: the version changes only when the holder changes.
          const renewed = { ...current, expiresAt: event.at + event.ttlMs };
          enqueue.assign({ holder: renewed });
          enqueue.emit({ type: 'lease.granted', holder: renewed, evicted: null });
          return;
        }
        const version = context.version + 1;
        const holder: LeaseHolder = { sessionId: event.sessionId, leaseId: event.leaseId, version, grantedAt: event.at, expiresAt: event.at + event.ttlMs };
        let sessions = withUntil(lapsed ?? liveEntries(context, event.at), event.sessionId, () => null);
        if (current) sessions = withUntil(sessions, current.sessionId, idleFrom(event.at));
        enqueue.assign({ holder, version, sessions });
        enqueue.emit({ type: 'lease.granted', holder, evicted: current });
        if (current) enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: current, reason: 'superseded', version } });
      }),
    },
    'lease.renew': {
      actions: enqueueActions(({ context, event, enqueue }) => {
        const lapsed = afterLapse(context, event.at);
        if (lapsed) {
          enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: context.holder!, reason: 'lapsed', version: context.version } });
          enqueue.assign({ holder: null, sessions: lapsed });
          enqueue.emit({ type: 'lease.not_held', holder: null });
          return;
        }
        const current = context.holder;
        if (current?.sessionId !== event.sessionId || current.leaseId !== event.leaseId) {
          enqueue.emit({ type: 'lease.not_held', holder: current });
          return;
        }
        const renewed = { ...current, expiresAt: Math.max(current.expiresAt, event.at + event.ttlMs) };
        enqueue.assign({ holder: renewed });
        enqueue.emit({ type: 'lease.renewed', holder: renewed });
      }),
    },
    'lease.release': {
      guard: ({ context, event }) => context.holder?.sessionId === event.sessionId || !context.ended?.includes(event.sessionId),
      actions: enqueueActions(({ context, event, enqueue }) => {
        const ended = [...(context.ended ?? []).filter((id) => id !== event.sessionId), event.sessionId].slice(-ENDED_KEPT);
        // An ended session no longer counts against the cap.
        const sessions = liveEntries(context, event.at).filter((entry) => entry.sessionId !== event.sessionId);
        if (context.holder?.sessionId === event.sessionId) {
          enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: context.holder, reason: 'released', version: context.version } });
          enqueue.assign({ holder: null, ended, sessions });
        } else enqueue.assign({ ended, sessions });
      }),
    },
    'timer.due': {
      guard: ({ context, event }) => event.name === 'expiry' && afterLapse(context, event.at) !== undefined,
      actions: enqueueActions(({ context, event, enqueue }) => {
        enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: context.holder!, reason: 'lapsed', version: context.version } });
        enqueue.assign({ holder: null, sessions: afterLapse(context, event.at)! });
      }),
    },
    'lease.open': {
      actions: enqueueActions(({ context, event, enqueue }) => {
        const live = liveEntries(context, event.at);
        const refusal = openRefusal(context, event.environmentId, event.cap, event.at);
        if (refusal) {
          enqueue.emit({ type: 'lease.open_refused', sessionId: event.sessionId, ...refusal });
          // Forgetting stale entries is worth a write even when refused: the next creation reads less.
          if (live.length !== (context.sessions ?? []).length) enqueue.assign({ sessions: live });
          return;
        }
        const entry: LiveSessionEntry = { sessionId: event.sessionId, environmentId: event.environmentId, idleTtlMs: event.idleTtlMs, until: event.at + event.idleTtlMs + IDLE_SLACK_MS };
        enqueue.assign({ sessions: [...live, entry] });
        enqueue.emit({ type: 'lease.opened', sessionId: event.sessionId });
      }),
    },
  },
});

export function runtimeLeaseTimers(context: RuntimeLeaseContext): Record<string, number> {
  return context.holder ? { expiry: context.holder.expiresAt } : {};
}
