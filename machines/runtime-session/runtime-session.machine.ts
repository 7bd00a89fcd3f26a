import { assign, setup } from 'xstate';

/**
 * One Runtime session: an Environment page (or desktop shell world) of one person, bound at creation to the origin it
 * was created from and to the Environment whose client issued the token. Its own record: who, where, and whether it
 * has ended. Whether it holds the lease right now is the lease actor's to say; this machine follows it by version, so
 * the order in which `activated`/`superseded` arrive does not matter (an older version never overrides a newer one).
 *
 * A session that does not hold the lease (standby, or superseded) is released by the platform once it has been idle
 * for its `idleTtlMs` (a durable deadline, `idleUntil`): a page closed without releasing, or a session created and never
 * activated, would otherwise stay live forever and fill the person's cap of live sessions. Holding the lease clears
 * the deadline; losing it (superseded, lapsed) starts it again.
 *
 * The session hears that it lost the lease from the lease actor after that actor's commit (at most once), and a
 * release frees the lease before it ends the session: a crash between the two, or a notice that failed, would leave
 * this record active with no deadline, never ended and never retired. So an active session asks the lease actor, once
 * every `idleTtlMs` (`leaseCheckAt`, durable), whether it still holds the lease; the answer arrives as the notice it
 * missed, and its idle deadline starts.
 */
export type RuntimeSessionStatus = 'standby' | 'active' | 'superseded' | 'released' | 'revoked';

export interface RuntimeSessionContext {
  readonly sessionId: string;
  readonly accountId: string;
  readonly actorId: string;
  readonly environmentId: string;
  readonly origin: string;
  readonly browserId: string | null;
  readonly createdAt: number;
  /** The lease this session holds, as far as this session has been told. */
  readonly lease: { readonly leaseId: string; readonly version: number } | null;
  /** The highest lease version this session has heard of (its own or the one that superseded it); 0 before any. */
  readonly seenVersion: number;
  readonly endedAt: number | null;
  /** `released` (the page), `idle_expired` (the idle deadline passed), or the revocation's reason (`browser_logout`). */
  readonly endedReason: string | null;
  /**
   * How long this session may stay without the lease before it is released, fixed at creation (a configuration
   * change applies to new sessions). Absent in sessions stored before idle expiry existed: those never expire.
   */
  readonly idleTtlMs?: number;
  /** When this session is released unless it takes the lease first; null while it holds the lease, or once ended. */
  readonly idleUntil?: number | null;
  /**
   * While active: when this session next asks the lease actor whether it still holds the lease (the effect
   * `leaseCheck`). Null or absent otherwise, and in active sessions stored before it existed.
   */
  readonly leaseCheckAt?: number | null;
  readonly lastActivityAt: number;
  /**
   * What the person shows others in the Environment while this session is active; null otherwise. Ephemeral (see the
   * kind): it lasts as long as the activation, is never stored, and nothing else in this machine reads it.
   */
  readonly presence: { readonly state: PresenceState; readonly since: number } | null;
}

export type PresenceState = 'available' | 'away' | 'busy';

export interface RuntimeSessionInput {
  readonly sessionId: string;
}

export type RuntimeSessionEvent =
  | {
      readonly type: 'session.create';
      readonly accountId: string;
      readonly actorId: string;
      readonly environmentId: string;
      readonly origin: string;
      readonly browserId: string | null;
      readonly idleTtlMs: number;
      readonly at: number;
    }
  | { readonly type: 'session.read'; readonly at: number }
  | { readonly type: 'session.activated'; readonly leaseId: string; readonly version: number; readonly at: number }
  /** The principal's lease moved to another session at `version`. */
  | { readonly type: 'session.superseded'; readonly version: number; readonly at: number }
  /** This session's lease at `version` ended without a successor (lapsed or released by the lease). */
  | { readonly type: 'session.lease_lapsed'; readonly version: number; readonly at: number }
  | { readonly type: 'session.presence'; readonly state: PresenceState; readonly at: number }
  | { readonly type: 'session.release'; readonly at: number }
  | { readonly type: 'session.revoke'; readonly reason: string; readonly at: number }
  | { readonly type: 'timer.due'; readonly name: string; readonly dueAt: number; readonly at: number };

/** The durable timer of the idle deadline. */
export const IDLE_TIMER = 'idle';
/** The durable timer of an active session's look at the lease (`leaseCheckAt`). */
export const LEASE_CHECK_TIMER = 'lease_check';

/** What the session's owner learns after an idle session was released (its lease and sockets are told). */
export interface SessionIdleExpired {
  readonly sessionId: string;
  readonly accountId: string;
}

/** What an active session asks its lease actor: whether it still holds this lease (see `leaseCheckAt`). */
export interface SessionLeaseCheck {
  readonly sessionId: string;
  readonly accountId: string;
  readonly leaseId: string;
  readonly version: number;
}

export const runtimeSessionMachine = setup({
  types: { context: {} as RuntimeSessionContext, events: {} as RuntimeSessionEvent, input: {} as RuntimeSessionInput },
  guards: {
    newerActivation: ({ context, event }) => event.type === 'session.activated' && event.version > context.seenVersion,
    newerSupersession: ({ context, event }) => event.type === 'session.superseded' && event.version > (context.lease?.version ?? 0) && context.seenVersion > 0,
    ownLeaseLapsed: ({ context, event }) => event.type === 'session.lease_lapsed' && context.lease?.version === event.version,
    // Timers are delivered at least once and may be stale (the deadline moved since): only the current one counts.
    idleDeadlinePassed: ({ context, event }) =>
      event.type === 'timer.due' && event.name === IDLE_TIMER && context.idleUntil !== undefined && context.idleUntil !== null && event.at >= context.idleUntil,
    leaseCheckDue: ({ context, event }) =>
      event.type === 'timer.due' && event.name === LEASE_CHECK_TIMER && context.leaseCheckAt != null && event.at >= context.leaseCheckAt,
  },
  actions: {
    takeLease: assign(({ context, event }) => {
      if (event.type !== 'session.activated') return {};
      return {
        lease: { leaseId: event.leaseId, version: event.version },
        seenVersion: event.version,
        lastActivityAt: event.at,
        idleUntil: null,
        leaseCheckAt: context.idleTtlMs === undefined ? null : event.at + context.idleTtlMs,
      };
    }),
    /** The next look at the lease, one idle period on: the check itself is the effect that follows the commit. */
    moveLeaseCheck: assign(({ context, event }) => ({ leaseCheckAt: context.idleTtlMs === undefined ? null : event.at + context.idleTtlMs })),
    end: assign(({ event }) => ({
      lease: null,
      presence: null,
      endedAt: event.at,
      endedReason: event.type === 'session.revoke' ? event.reason : event.type === 'timer.due' ? 'idle_expired' : 'released',
      lastActivityAt: event.at,
      idleUntil: null,
      leaseCheckAt: null,
    })),
    loseLease: assign(({ context, event }) => {
      if (event.type !== 'session.superseded' && event.type !== 'session.lease_lapsed') return {};
      return {
        lease: null,
        presence: null,
        seenVersion: Math.max(context.seenVersion, event.version),
        lastActivityAt: event.at,
        idleUntil: context.idleTtlMs === undefined ? null : event.at + context.idleTtlMs,
        leaseCheckAt: null,
      };
    }),
    /** After the commit: the lease actor forgets the session (it may hold the lease in a race), its sockets are told. */
    idleExpired: (_, _params: SessionIdleExpired) => {},
    /** After the commit: the lease actor is asked whether this session still holds the lease, and it is told if not. */
    leaseCheck: (_, _params: SessionLeaseCheck) => {},
  },
}).createMachine({
  id: 'runtime-session',
  context: ({ input }) => ({
    sessionId: input.sessionId,
    accountId: '',
    actorId: '',
    environmentId: '',
    origin: '',
    browserId: null,
    createdAt: 0,
    lease: null,
    seenVersion: 0,
    endedAt: null,
    endedReason: null,
    lastActivityAt: 0,
    presence: null,
  }),
  initial: 'unborn',
  states: {
    unborn: {
      on: {
        'session.create': {
          target: 'standby',
          actions: assign(({ event }) => ({
            accountId: event.accountId,
            actorId: event.actorId,
            environmentId: event.environmentId,
            origin: event.origin,
            browserId: event.browserId,
            createdAt: event.at,
            lastActivityAt: event.at,
            idleTtlMs: event.idleTtlMs,
            idleUntil: event.at + event.idleTtlMs,
          })),
        },
      },
    },
    standby: {
      on: {
        'session.activated': { guard: 'newerActivation', target: 'active', actions: 'takeLease' },
        // A supersession may overtake the activation it undoes; remember its version so the activation is ignored.
        'session.superseded': { guard: ({ context, event }) => event.version > context.seenVersion, target: 'superseded', actions: 'loseLease' },
        'session.release': { target: 'released', actions: 'end' },
        'session.revoke': { target: 'revoked', actions: 'end' },
        'timer.due': {
          guard: 'idleDeadlinePassed',
          target: 'released',
          actions: ['end', { type: 'idleExpired', params: ({ context }) => ({ sessionId: context.sessionId, accountId: context.accountId }) }],
        },
      },
    },
    active: {
      on: {
        'session.activated': { guard: 'newerActivation', actions: 'takeLease' },
        'session.superseded': { guard: 'newerSupersession', target: 'superseded', actions: 'loseLease' },
        'session.lease_lapsed': { guard: 'ownLeaseLapsed', target: 'standby', actions: 'loseLease' },
        'session.presence': {
          guard: ({ context, event }) => context.presence?.state !== event.state,
          actions: assign(({ event }) => ({ presence: { state: event.state, since: event.at } })),
        },
        'session.release': { target: 'released', actions: 'end' },
        'session.revoke': { target: 'revoked', actions: 'end' },
        'timer.due': {
          guard: 'leaseCheckDue',
          actions: [
            'moveLeaseCheck',
            {
              type: 'leaseCheck',
              params: ({ context }) => ({ sessionId: context.sessionId, accountId: context.accountId, leaseId: context.lease!.leaseId, version: context.lease!.version }),
            },
          ],
        },
      },
    },
    superseded: {
      on: {
        'session.activated': { guard: 'newerActivation', target: 'active', actions: 'takeLease' },
        'session.release': { target: 'released', actions: 'end' },
        'session.revoke': { target: 'revoked', actions: 'end' },
        'timer.due': {
          guard: 'idleDeadlinePassed',
          target: 'released',
          actions: ['end', { type: 'idleExpired', params: ({ context }) => ({ sessionId: context.sessionId, accountId: context.accountId }) }],
        },
      },
    },
    released: {},
    revoked: {},
  },
});

/** The idle deadline while the session is live and without the lease, the look at the lease while it holds it. */
export function runtimeSessionTimers(context: RuntimeSessionContext): Record<string, number> {
  if (context.endedAt !== null) return {};
  const timers: Record<string, number> = {};
  if (context.idleUntil != null) timers[IDLE_TIMER] = context.idleUntil;
  if (context.leaseCheckAt != null && context.lease !== null) timers[LEASE_CHECK_TIMER] = context.leaseCheckAt;
  return timers;
}
