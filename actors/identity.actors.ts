import { defineActorKind } from './actor-kind.js';
import { accountMachine, accountTimers } from '../machines/account/account.machine.js';
import { accountHandleMachine, accountHandleTimers } from '../machines/account-handle/account-handle.machine.js';
import { deviceMachine } from '../machines/device/device.machine.js';
import { HANDLE, idPattern } from '../identity/ids.js';

export const accountKind = defineActorKind({
  name: 'account',
  machine: accountMachine,
  key: { pattern: idPattern('acc'), describe: 'account id: acc_ + 26 base32 characters' },
  timers: (snapshot) => accountTimers(snapshot.context),
});

export const accountHandleKind = defineActorKind({
  name: 'account-handle',
  machine: accountHandleMachine,
  key: { pattern: HANDLE, describe: 'handle, lower-case: a letter then 2 to 31 of a-z 0-9 _ -' },
  timers: (snapshot) => accountHandleTimers(snapshot.context),
});

export const deviceKind = defineActorKind({
  name: 'device',
  machine: deviceMachine,
  key: { pattern: idPattern('dev'), describe: 'device id: dev_ + 26 base32 characters' },
});

export const identityKinds = [accountKind, accountHandleKind, deviceKind] as const;
