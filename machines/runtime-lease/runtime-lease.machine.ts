import { enqueueActions, setup } from 'xstate';

/**
 * The one fenced Runtime lease of a person (keyed by account id: the private principal, never shown to Environments).
 * This actor is the authority on who holds the lease: a session is active exactly while it is the holder here. Its
 * mailbox serialises activations, so two sessions racing to activate always end with one holder and one evicted.
 *
 * The version grows with every grant and never goes back, so a fence (lease id + version) once superseded can never
 * match again. A lease that nobody renews lapses at `expiresAt` (a durable timer), so a closed tab does not keep it.
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
}

/** Far more than the activations one person can have in flight between their session check and their acquire. */
export const ENDED_KEPT = 32;

export type RuntimeLeaseEvent =
  | { readonly type: 'lease.acquire'; readonly sessionId: string; readonly leaseId: string; readonly ttlMs: number; readonly at: number }
  | { readonly type: 'lease.renew'; readonly sessionId: string; readonly leaseId: string; readonly ttlMs: number; readonly at: number }
  /** The session ended (released, or revoked by a logout): its lease, if it holds it, is freed without a successor. */
  | { readonly type: 'lease.release'; readonly sessionId: string; readonly at: number }
  | { readonly type: 'lease.read'; readonly at: number }
  | { readonly type: 'timer.due'; readonly name: string; readonly dueAt: number; readonly at: number };

export type LeaseEndReason = 'superseded' | 'released' | 'lapsed';

export type RuntimeLeaseEmitted =
  /** `evicted` is the session that held the lease until now (it is superseded), if any. */
  | { readonly type: 'lease.granted'; readonly holder: LeaseHolder; readonly evicted: LeaseHolder | null }
  | { readonly type: 'lease.renewed'; readonly holder: LeaseHolder }
  | { readonly type: 'lease.not_held'; readonly holder: LeaseHolder | null }
  /** The session asking for the lease has ended: nothing changed. */
  | { readonly type: 'lease.refused'; readonly sessionId: string; readonly reason: 'session_ended' };

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
        const current = context.holder;
        if (context.ended?.includes(event.sessionId)) {
          enqueue.emit({ type: 'lease.refused', sessionId: event.sessionId, reason: 'session_ended' });
          return;
        }
        if (current?.sessionId === event.sessionId) {
          // Activating the holder again keeps its fence: the version changes only when the holder changes.
          const renewed = { ...current, expiresAt: event.at + event.ttlMs };
          enqueue.assign({ holder: renewed });
          enqueue.emit({ type: 'lease.granted', holder: renewed, evicted: null });
          return;
        }
        const version = context.version + 1;
        const holder: LeaseHolder = { sessionId: event.sessionId, leaseId: event.leaseId, version, grantedAt: event.at, expiresAt: event.at + event.ttlMs };
        enqueue.assign({ holder, version });
        enqueue.emit({ type: 'lease.granted', holder, evicted: current });
        if (current) enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: current, reason: 'superseded', version } });
      }),
    },
    'lease.renew': {
      actions: enqueueActions(({ context, event, enqueue }) => {
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
        if (context.holder?.sessionId === event.sessionId) {
          enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: context.holder, reason: 'released', version: context.version } });
          enqueue.assign({ holder: null, ended });
        } else enqueue.assign({ ended });
      }),
    },
    'timer.due': {
      guard: ({ context, event }) => event.name === 'expiry' && context.holder !== null && event.at >= context.holder.expiresAt,
      actions: enqueueActions(({ context, enqueue }) => {
        enqueue({ type: 'leaseEnded', params: { accountId: context.accountId, holder: context.holder!, reason: 'lapsed', version: context.version } });
        enqueue.assign({ holder: null });
      }),
    },
  },
});

export function runtimeLeaseTimers(context: RuntimeLeaseContext): Record<string, number> {
  return context.holder ? { expiry: context.holder.expiresAt } : {};
}
