import { assign, emit, enqueueActions, setup } from 'xstate';
import type { AccountEmitted, AccountEvent, AccountRefusalCode, EnrolmentRequest, EnrollingDevice } from './account.events.js';

/**
 * One person's account: its handle, its enrolled devices and its epoch. Removing a device (or signing out, or
 * revoking the others) raises the epoch, which ends every passport and session issued under an older one.
 *
 * States: `unopened` (key allocated, nothing else) → `enrolling` (first device must prove possession of its key
 * before its enrolment expires) → `active`; `enrolling` → `abandoned` when that first enrolment expires, and
 * `unopened` → `abandoned` when a start reserved its handle and died before opening it (`account.lapse`). Further
 * devices enrol while `active`: they wait for an active device to admit or refuse them, then complete with the same
 * nonce proof. Pending enrolments expire through durable timers named `enrolment:<id>`.
 *
 * A completion that would admit a device but says its device actor is not yet kept (`deviceKept: false`) admits
 * nothing and answers `account.enrolmentAdmissible`: a device actor lapses at its enrolment's deadline unless kept
 * first, and one that lapsed and was retired names no account, so the account must never hold a device whose actor
 * might have lapsed.
 */
export interface AccountDevice extends EnrollingDevice {
  readonly status: 'active' | 'removed';
  readonly enrolledAt: number;
  readonly removedAt?: number;
  /**
   * The enrolment that admitted it, so that repeating its completion is answered again (absent on devices enrolled
   * before this was kept).
   */
  readonly enrolment?: { readonly id: string; readonly nonceHash: string };
}

export interface PendingEnrolment extends EnrolmentRequest {
  readonly mode: 'possession' | 'approval';
  readonly requestedAt: number;
  readonly decision: 'pending' | 'admitted' | 'refused';
}

export interface AccountContext {
  readonly handle: string | null;
  readonly epoch: number;
  readonly devices: Readonly<Record<string, AccountDevice>>;
  readonly enrolments: Readonly<Record<string, PendingEnrolment>>;
  /** When the first enrolment lapsed (`abandoned`): the account's end. Absent on accounts abandoned before it was kept. */
  readonly abandonedAt?: number;
}

/**
 * Undecided enrolments an account holds at once. A new request beyond it is never refused: it takes the place of the
 * oldest request of whoever holds the most, so a stranger filling the list from one address only ever displaces their
 * own requests, and the owner's new device always gets on it.
 */
export const MAX_PENDING_ENROLMENTS = 5;

/**
 * Active devices an account may hold, far above what a person runs. Every device lives in the account's state, which
 * every write of the account stores again (a new enrolment's deadline stores the snapshot), so without a cap one
 * person admitting key after key grew their account, and the cost of each stranger's request to join it, for good.
 */
export const MAX_ACTIVE_DEVICES = 50;
/**
 * Removed devices the account remembers (the newest removals): a removed device is refused `device_removed`, one
 * forgotten `device_unknown`, either way never admitted. Kept without a bound, enrolling and removing key after key
 * (which the active cap does not stop) grew the state the same way.
 */
export const REMOVED_DEVICES_KEPT = 50;

/** The enrolment to drop for a new request when the list is full: the oldest of the requester holding the most. */
function displacedBy(undecided: readonly PendingEnrolment[]): PendingEnrolment | undefined {
  const held = new Map<string, number>();
  for (const e of undecided) held.set(e.requester ?? '', (held.get(e.requester ?? '') ?? 0) + 1);
  const most = Math.max(...held.values());
  return undecided.filter((e) => held.get(e.requester ?? '') === most).sort((a, b) => a.requestedAt - b.requestedAt)[0];
}

type Ctx = AccountContext;
type Ev = AccountEvent;
type Of<T extends Ev['type']> = Extract<Ev, { type: T }>;

const refused = (code: AccountRefusalCode): AccountEmitted => ({ type: 'account.refused', code });
const isActive = (ctx: Ctx, deviceId: string): boolean => ctx.devices[deviceId]?.status === 'active';
/** The active device an enrolment became when it completed; its pending record is gone by then. */
const completedDevice = (ctx: Ctx, enrolmentId: string): Ctx['devices'][string] | undefined =>
  Object.values(ctx.devices).find((d) => d.status === 'active' && d.enrolment?.id === enrolmentId);
const isFull = (ctx: Ctx): boolean => Object.values(ctx.devices).filter((d) => d.status === 'active').length >= MAX_ACTIVE_DEVICES;
/**
 * A further device joins only when an enrolled one admits it, so an account whose last active device left could never
 * be entered again, and its handle would stay bound to it for good: the last device may not end its enrolment.
 */
const isLastActive = (ctx: Ctx, deviceId: string): boolean =>
  isActive(ctx, deviceId) && !Object.values(ctx.devices).some((d) => d.status === 'active' && d.id !== deviceId);

function withoutEnrolment(ctx: Ctx, enrolmentId: string): Readonly<Record<string, PendingEnrolment>> {
  const { [enrolmentId]: _gone, ...rest } = ctx.enrolments;
  return rest;
}

function admit(ctx: Ctx, enrolment: PendingEnrolment, at: number): Partial<Ctx> {
  const device: AccountDevice = {
    ...enrolment.device,
    status: 'active',
    enrolledAt: at,
    enrolment: { id: enrolment.enrolmentId, nonceHash: enrolment.nonceHash },
  };
  return { devices: { ...ctx.devices, [device.id]: device }, enrolments: withoutEnrolment(ctx, enrolment.enrolmentId) };
}

/**
 * Removing devices raises the epoch, and admissions not yet completed end with the old epoch: each was granted by a
 * device of it (perhaps the very one now removed), and a stolen device must not leave a door open behind it. Pending
 * requests stay for the remaining devices to decide.
 */
function removeDevices(ctx: Ctx, ids: readonly string[], at: number): Partial<Ctx> {
  const devices = { ...ctx.devices };
  for (const id of ids) devices[id] = { ...devices[id]!, status: 'removed', removedAt: at };
  // Oldest removal first (one without a time, stored before removedAt was kept, older than any); ties keep their order.
  const removed = Object.values(devices)
    .filter((d) => d.status === 'removed')
    .sort((a, b) => (a.removedAt ?? -Infinity) - (b.removedAt ?? -Infinity));
  for (const forgotten of removed.slice(0, Math.max(0, removed.length - REMOVED_DEVICES_KEPT))) delete devices[forgotten.id];
  const enrolments = Object.fromEntries(Object.entries(ctx.enrolments).filter(([, e]) => e.decision !== 'admitted'));
  return { devices, enrolments, epoch: ctx.epoch + 1 };
}

/** Devices the account no longer remembers after `change` (the oldest removals beyond REMOVED_DEVICES_KEPT). */
const forgottenBy = (ctx: Ctx, change: Partial<Ctx>): string[] => Object.keys(ctx.devices).filter((id) => !(id in change.devices!));

export const accountMachine = setup({
  types: {
    context: {} as AccountContext,
    events: {} as AccountEvent,
    emitted: {} as AccountEmitted,
  },
}).createMachine({
  id: 'account',
  context: { handle: null, epoch: 0, devices: {}, enrolments: {} },
  initial: 'unopened',
  states: {
    unopened: {
      on: {
        'account.open': {
          target: 'enrolling',
          actions: enqueueActions(({ event, enqueue }) => {
            const e = event as Of<'account.open'>;
            const enrolment: PendingEnrolment = { ...e.enrolment, mode: 'possession', requestedAt: e.at, decision: 'pending' };
            enqueue.assign({ handle: e.handle, enrolments: { [enrolment.enrolmentId]: enrolment } });
            enqueue.emit({ type: 'account.enrolmentRequested', enrolmentId: enrolment.enrolmentId });
          }),
        },
        // Asked by a new enrolment for the handle this id reserved a while ago without ever opening (its start died in
        // between): abandoned here, in the account's own order, a late open is ignored, so the handle may go at once.
        'account.lapse': {
          target: 'abandoned',
          actions: [assign(({ event }) => ({ abandonedAt: event.at })), emit({ type: 'account.lapsed' })],
        },
      },
    },
    enrolling: {
      on: {
        'account.enrolment.complete': [
          {
            guard: ({ context, event }) => {
              const pending = context.enrolments[event.enrolmentId];
              return pending !== undefined && pending.nonceHash === event.nonceHash && event.at < pending.expiresAt && event.deviceKept !== false;
            },
            target: 'active',
            actions: enqueueActions(({ context, event, enqueue }) => {
              const pending = context.enrolments[event.enrolmentId]!;
              enqueue.assign({ ...admit(context, pending, event.at), epoch: 1 });
              enqueue.emit({ type: 'account.enrolled', deviceId: pending.device.id, epoch: 1 });
            }),
          },
          {
            guard: ({ context, event }) => {
              const pending = context.enrolments[event.enrolmentId];
              return pending !== undefined && pending.nonceHash === event.nonceHash && event.at < pending.expiresAt;
            },
            actions: emit(({ context, event }) => ({ type: 'account.enrolmentAdmissible', deviceId: context.enrolments[event.enrolmentId]!.device.id })),
          },
          {
            // Past its deadline it has expired, whatever the proof, even before its timer is delivered.
            guard: ({ context, event }) => {
              const pending = context.enrolments[event.enrolmentId];
              return pending !== undefined && event.at < pending.expiresAt;
            },
            actions: emit(refused('enrolment_proof_invalid')),
          },
          { actions: emit(refused('enrolment_not_found')) },
        ],
        'timer.due': {
          guard: ({ context, event }) => Object.keys(context.enrolments).some((id) => event.name === `enrolment:${id}`),
          target: 'abandoned',
          actions: assign(({ event }) => ({ enrolments: {}, abandonedAt: event.at })),
        },
        // Asked by a new enrolment for the handle: once abandoned here, in the account's own order, no completion can
        // follow, so the handle may go to the new account at once.
        // The same device key starting again (a start whose answer was lost) ends it too: only that key's holder could
        // complete it, and that holder has just asked for a new enrolment instead.
        'account.lapse': {
          guard: ({ context, event }) =>
            Object.values(context.enrolments).every((e) => event.at >= e.expiresAt || (event.thumbprint !== undefined && e.device.thumbprint === event.thumbprint)),
          target: 'abandoned',
          actions: [assign(({ event }) => ({ enrolments: {}, abandonedAt: event.at })), emit({ type: 'account.lapsed' })],
        },
      },
    },
    active: {
      on: {
        'account.enrolment.request': {
          actions: enqueueActions(({ context, event, enqueue }) => {
            const undecided = Object.values(context.enrolments).filter((e) => e.decision === 'pending');
            const enrolments = { ...context.enrolments };
            if (undecided.length >= MAX_PENDING_ENROLMENTS) {
              const displaced = displacedBy(undecided);
              if (displaced) delete enrolments[displaced.enrolmentId];
            }
            const enrolment: PendingEnrolment = { ...event.enrolment, mode: 'approval', requestedAt: event.at, decision: 'pending' };
            enqueue.assign({ enrolments: { ...enrolments, [enrolment.enrolmentId]: enrolment } });
            enqueue.emit({ type: 'account.enrolmentRequested', enrolmentId: enrolment.enrolmentId });
          }),
        },
        'account.enrolment.decide': {
          actions: enqueueActions(({ context, event, enqueue }) => {
            if (!isActive(context, event.byDeviceId)) return void enqueue.emit(refused('device_not_active'));
            const pending = context.enrolments[event.enrolmentId];
            // Admitted and completed, it lives on as its device: a late decision was still beaten by the admission.
            if (!pending && completedDevice(context, event.enrolmentId)) return void enqueue.emit(refused('enrolment_already_decided'));
            if (!pending || event.at >= pending.expiresAt) return void enqueue.emit(refused('enrolment_not_found'));
            if (pending.decision !== 'pending') return void enqueue.emit(refused('enrolment_already_decided'));
            if (event.decision === 'admit' && isFull(context)) return void enqueue.emit(refused('device_limit_reached'));
            const decision = event.decision === 'admit' ? 'admitted' : 'refused';
            enqueue.assign({ enrolments: { ...context.enrolments, [pending.enrolmentId]: { ...pending, decision } } });
            enqueue.emit({ type: 'account.enrolmentDecided', enrolmentId: pending.enrolmentId, decision: event.decision });
          }),
        },
        'account.enrolment.complete': {
          actions: enqueueActions(({ context, event, enqueue }) => {
            const pending = context.enrolments[event.enrolmentId];
            if (!pending) {
              // Completed already: the same proof is answered again, with the current epoch. A client whose first
              // answer was lost retries, and a kept device renews its passport after a removal raised the epoch.
              const done = completedDevice(context, event.enrolmentId);
              if (!done) return void enqueue.emit(refused('enrolment_not_found'));
              if (done.enrolment!.nonceHash !== event.nonceHash) return void enqueue.emit(refused('enrolment_proof_invalid'));
              return void enqueue.emit({ type: 'account.enrolled', deviceId: done.id, epoch: context.epoch });
            }
            if (event.at >= pending.expiresAt) return void enqueue.emit(refused('enrolment_not_found'));
            if (pending.nonceHash !== event.nonceHash) return void enqueue.emit(refused('enrolment_proof_invalid'));
            if (pending.decision === 'pending') return void enqueue.emit(refused('enrolment_pending'));
            if (pending.decision === 'refused') {
              enqueue.assign({ enrolments: withoutEnrolment(context, pending.enrolmentId) });
              return void enqueue.emit(refused('enrolment_refused'));
            }
            // Admitted while there was room, with others admitted beside it: the first to complete takes the place.
            if (isFull(context)) return void enqueue.emit(refused('device_limit_reached'));
            if (event.deviceKept === false) return void enqueue.emit({ type: 'account.enrolmentAdmissible', deviceId: pending.device.id });
            enqueue.assign(admit(context, pending, event.at));
            enqueue.emit({ type: 'account.enrolled', deviceId: pending.device.id, epoch: context.epoch });
          }),
        },
        'account.device.remove': {
          actions: enqueueActions(({ context, event, enqueue }) => {
            if (!isActive(context, event.byDeviceId)) return void enqueue.emit(refused('device_not_active'));
            if (!isActive(context, event.deviceId)) return void enqueue.emit(refused('device_not_found'));
            if (isLastActive(context, event.deviceId)) return void enqueue.emit(refused('last_device'));
            const change = removeDevices(context, [event.deviceId], event.at);
            enqueue.assign(change);
            enqueue.emit({ type: 'account.devicesRemoved', deviceIds: [event.deviceId], epoch: change.epoch!, forgotten: forgottenBy(context, change) });
          }),
        },
        'account.devices.revokeOthers': {
          actions: enqueueActions(({ context, event, enqueue }) => {
            if (!isActive(context, event.byDeviceId)) return void enqueue.emit(refused('device_not_active'));
            const others = Object.values(context.devices)
              .filter((d) => d.status === 'active' && d.id !== event.byDeviceId)
              .map((d) => d.id);
            const change = removeDevices(context, others, event.at);
            enqueue.assign(change);
            enqueue.emit({ type: 'account.devicesRemoved', deviceIds: others, epoch: change.epoch!, forgotten: forgottenBy(context, change) });
          }),
        },
        'account.signOut': {
          actions: enqueueActions(({ context, event, enqueue }) => {
            if (!isActive(context, event.deviceId)) return void enqueue.emit(refused('device_not_active'));
            if (isLastActive(context, event.deviceId)) return void enqueue.emit(refused('last_device'));
            const change = removeDevices(context, [event.deviceId], event.at);
            enqueue.assign(change);
            enqueue.emit({ type: 'account.devicesRemoved', deviceIds: [event.deviceId], epoch: change.epoch!, forgotten: forgottenBy(context, change) });
          }),
        },
        'timer.due': {
          guard: ({ context, event }) => context.enrolments[event.name.replace(/^enrolment:/, '')] !== undefined,
          actions: assign(({ context, event }) => ({ enrolments: withoutEnrolment(context, event.name.replace(/^enrolment:/, '')) })),
        },
        'account.open': { actions: emit(refused('enrolment_not_found')) },
      },
    },
    // Events a state does not name are ignored (no journal row, no write): probing an unknown account costs nothing.
    // Final: nothing leaves it, so the account is ended (accountKind.endedAt) and may be retired, loading afterwards as
    // `unopened`, which likewise accepts no completion and holds no device, and which only a fresh id is opened as.
    abandoned: {},
  },
});

/** Deadlines of pending enrolments, as durable timers. */
export function accountTimers(context: AccountContext): Record<string, number> {
  const timers: Record<string, number> = {};
  for (const e of Object.values(context.enrolments)) timers[`enrolment:${e.enrolmentId}`] = e.expiresAt;
  return timers;
}

export type { EnrolmentRequest };
