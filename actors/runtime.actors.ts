import { defineActorKind, storedState, withContext, type ActorStateUpgrade } from './actor-kind.js';
import { idPattern } from '../identity/ids.js';
import { runtimeLeaseMachine, runtimeLeaseTimers, type LeaseEndReason, type LeaseHolder } from '../machines/runtime-lease/runtime-lease.machine.js';
import { runtimeSessionMachine, runtimeSessionTimers, type SessionIdleExpired, type SessionLeaseCheck } from '../machines/runtime-session/runtime-session.machine.js';

export const RUNTIME_SESSION_KIND = 'runtime-session';
export const RUNTIME_LEASE_KIND = 'runtime-lease';

export interface LeaseEnded {
  readonly accountId: string;
  readonly holder: LeaseHolder;
  readonly reason: LeaseEndReason;
  /** The lease version current after the end (the successor's, when superseded). */
  readonly version: number;
}

/**
 * Version 2: an active session stored before `leaseCheckAt` existed has no look at its lease, so a notice it missed
 * (its lease moved on, lapsed, or a crash came between the lease's release and its own) left it active for good. It
 * gets the deadline taking the lease would have set: `lastActivityAt` (in an active session, when it took the lease)
 * plus its idle period, so one long past is looked at as soon as it loads. A session without an idle period (stored
 * before idle expiry) has none, as taking the lease gives it none.
 */
export const runtimeSessionUpgrades: readonly ActorStateUpgrade[] = [
  {
    name: 'active sessions get leaseCheckAt',
    snapshot: (snapshot) => {
      const state = storedState(snapshot);
      const { leaseCheckAt, idleTtlMs, lastActivityAt } = state.context;
      if (state.value !== 'active' || leaseCheckAt !== undefined || typeof idleTtlMs !== 'number') return snapshot;
      if (typeof lastActivityAt !== 'number') throw new Error(`lastActivityAt is ${String(lastActivityAt)}, not a time`);
      return withContext(state, { leaseCheckAt: lastActivityAt + idleTtlMs });
    },
  },
];

/**
 * The Runtime plane's actor kinds. `leaseEnded` runs after the lease actor committed an end of a holding (the sessions
 * and sockets are told); `idleExpired` after a session committed its release for idleness (the lease actor forgets
 * it, its sockets are told); `leaseCheck` after an active session committed its periodic look at the lease (it is
 * told what it missed). All are bound late because the kinds exist before the services they notify.
 */
export function runtimeKinds(
  leaseEnded: (ended: LeaseEnded) => void,
  idleExpired: (expired: SessionIdleExpired) => void,
  leaseCheck: (check: SessionLeaseCheck) => void,
) {
  const session = defineActorKind({
    name: RUNTIME_SESSION_KIND,
    machine: runtimeSessionMachine.provide({
      actions: {
        idleExpired: (_, params) => idleExpired(params),
        leaseCheck: (_, params) => leaseCheck(params),
      },
    }),
    key: { pattern: idPattern('rts'), describe: 'runtime session id: rts_ + 26 base32 characters' },
    input: (key: string) => ({ sessionId: key }),
    stateVersion: 2,
    upgrades: runtimeSessionUpgrades,
    timers: (snapshot) => runtimeSessionTimers(snapshot.context),
    // Released and revoked are final (nothing leaves them) and session ids are never issued twice.
    endedAt: (snapshot) => snapshot.context.endedAt,
    // Presence is what a page shows while its socket is open: the page says it again after reconnecting, so storing
    // every change (the runtime socket's most frequent message) would buy nothing.
    ephemeral: {
      events: new Set(['session.presence']),
      forget: (snapshot) => (snapshot.context.presence === null ? snapshot : { ...snapshot, context: { ...snapshot.context, presence: null } }),
    },
  });
  const lease = defineActorKind({
    name: RUNTIME_LEASE_KIND,
    machine: runtimeLeaseMachine.provide({
      actions: {
        leaseEnded: (_, params) => leaseEnded(params),
      },
    }),
    key: { pattern: idPattern('acc'), describe: "the person's account id: acc_ + 26 base32 characters" },
    input: (key: string) => ({ accountId: key }),
    timers: (snapshot) => runtimeLeaseTimers(snapshot.context),
  });
  return [session, lease] as const;
}
