import { defineActorKind, storedState, withContext, type ActorStateUpgrade, type StoredSnapshotFacts } from './actor-kind.js';
import { accountMachine, accountTimers } from '../machines/account/account.machine.js';
import { accountHandleMachine, accountHandleTimers } from '../machines/account-handle/account-handle.machine.js';
import { deviceMachine, deviceTimers } from '../machines/device/device.machine.js';
import { HANDLE, idPattern } from '../identity/ids.js';

/**
 * Version 2 of the account and handle kinds: what ended before its end was recorded (an account abandoned, a handle
 * freed) gets that end, so it is retired like those that ended since. The row's stored time stands for it: the write
 * that ended it stored the snapshot (its timers changed), and neither state is left but by a later event, which the
 * journal after the snapshot replays.
 */
function endRecorded(value: string, field: string): ActorStateUpgrade {
  return {
    name: `${value} ${field === 'abandonedAt' ? 'accounts' : 'handles'} get ${field}`,
    snapshot: (snapshot: unknown, stored: StoredSnapshotFacts) => {
      const state = storedState(snapshot);
      return state.value === value && state.context[field] === undefined ? withContext(state, { [field]: stored.storedAt }) : snapshot;
    },
  };
}

export const accountKind = defineActorKind({
  name: 'account',
  machine: accountMachine,
  key: { pattern: idPattern('acc'), describe: 'account id: acc_ + 26 base32 characters' },
  stateVersion: 2,
  upgrades: [endRecorded('abandoned', 'abandonedAt')],
  timers: (snapshot) => accountTimers(snapshot.context),
  // Abandoned is final. Retired, it loads as `unopened`: no completion, no device, and only a fresh id is ever opened.
  // Its handle's reservation lapses an hour after the abandonment at most, long before ACTOR_ENDED_RETENTION_DAYS, so
  // no reservation outlives the account it names (a holder read as `unopened` is never taken over early).
  endedAt: (snapshot) => (snapshot.value === 'abandoned' ? (snapshot.context.abandonedAt ?? null) : null),
});

export const accountHandleKind = defineActorKind({
  name: 'account-handle',
  machine: accountHandleMachine,
  key: { pattern: HANDLE, describe: 'handle, lower-case: a letter then 2 to 31 of a-z 0-9 _ -' },
  stateVersion: 2,
  upgrades: [endRecorded('free', 'freedAt')],
  timers: (snapshot) => accountHandleTimers(snapshot.context),
  // A free handle is exactly a never-written one; reserving or binding it again undoes the end.
  endedAt: (snapshot) => (snapshot.value === 'free' ? (snapshot.context.freedAt ?? null) : null),
});

export const deviceKind = defineActorKind({
  name: 'device',
  machine: deviceMachine,
  key: { pattern: idPattern('dev'), describe: 'device id: dev_ + 26 base32 characters' },
  timers: (snapshot) => deviceTimers(snapshot.context),
  // Lapsed and forgotten are final, and retired they load as `unassigned`: an id that names no account, as a lapsed
  // one must and as a forgotten one already does (its account no longer holds it).
  endedAt: (snapshot) =>
    snapshot.value === 'lapsed' ? (snapshot.context.lapsedAt ?? null) : snapshot.value === 'forgotten' ? (snapshot.context.forgottenAt ?? null) : null,
});

export const identityKinds = [accountKind, accountHandleKind, deviceKind] as const;
