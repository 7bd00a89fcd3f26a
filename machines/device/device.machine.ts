import { emit, enqueueActions, setup } from 'xstate';

/**
 * Which account a device id belongs to. Assertions name only their device (`kid`), so no account id ever travels in
 * them or in enrolment answers; the first assignment is final.
 *
 * An id is assigned when its enrolment starts, before anyone knows whether it will complete, so a device that is never
 * enrolled must end, or every enrolment start would stay stored for good. It is `kept` when its account is about to
 * admit it (the account admits no device whose actor is not kept: `account.enrolment.complete` with `deviceKept`), and
 * `lapsed` at its enrolment's deadline otherwise: an ended device that is retired loads as `unassigned`, naming no
 * account, which is exactly what a lapsed one must be (its account holds no such device, and ids are never reused).
 * Devices assigned before deadlines were kept (no `expiresAt`) never lapse.
 */
export type DeviceEvent =
  | { readonly type: 'device.assign'; readonly accountId: string; readonly expiresAt?: number; readonly at: number }
  | { readonly type: 'device.keep'; readonly accountId: string; readonly at: number }
  /** Its account removed it and no longer remembers it (account.machine REMOVED_DEVICES_KEPT). */
  | { readonly type: 'device.forget'; readonly accountId: string; readonly at: number }
  | { readonly type: 'timer.due'; readonly name: string; readonly dueAt: number; readonly at: number };

export type DeviceEmitted =
  | { readonly type: 'device.assigned'; readonly accountId: string }
  | { readonly type: 'device.taken' };

export interface DeviceContext {
  readonly accountId: string | null;
  /** The enrolment's deadline, while the device may still lapse. */
  readonly expiresAt?: number | null;
  /** When it lapsed: the device's end. */
  readonly lapsedAt?: number;
  /** When its account forgot it, long after removing it: the device's end. */
  readonly forgottenAt?: number;
}

type Keep = Extract<DeviceEvent, { type: 'device.keep' }>;
const inTime = (context: DeviceContext, event: Keep): boolean => context.expiresAt == null || event.at < context.expiresAt;

export const deviceMachine = setup({
  types: { context: {} as DeviceContext, events: {} as DeviceEvent, emitted: {} as DeviceEmitted },
}).createMachine({
  id: 'device',
  context: { accountId: null },
  initial: 'unassigned',
  states: {
    unassigned: {
      on: {
        'device.assign': {
          target: 'assigned',
          actions: enqueueActions(({ event, enqueue }) => {
            enqueue.assign({ accountId: event.accountId, ...(event.expiresAt === undefined ? {} : { expiresAt: event.expiresAt }) });
            enqueue.emit({ type: 'device.assigned', accountId: event.accountId });
          }),
        },
      },
    },
    assigned: {
      on: {
        'device.assign': { actions: emit({ type: 'device.taken' }) },
        'device.keep': [
          { guard: ({ context, event }) => event.accountId === context.accountId && inTime(context, event), target: 'kept', actions: enqueueActions(({ enqueue }) => enqueue.assign({ expiresAt: null })) },
          // Past its deadline it has lapsed, even before its timer is delivered: its enrolment can no longer complete.
          { guard: ({ context, event }) => event.accountId === context.accountId, target: 'lapsed', actions: enqueueActions(({ event, enqueue }) => enqueue.assign({ expiresAt: null, lapsedAt: event.at })) },
        ],
        'timer.due': {
          guard: ({ context, event }) => event.name === 'enrolment' && event.dueAt === context.expiresAt,
          target: 'lapsed',
          actions: enqueueActions(({ event, enqueue }) => enqueue.assign({ expiresAt: null, lapsedAt: event.at })),
        },
      },
    },
    kept: {
      on: {
        'device.assign': { actions: emit({ type: 'device.taken' }) },
        'device.forget': {
          guard: ({ context, event }) => event.accountId === context.accountId,
          target: 'forgotten',
          actions: enqueueActions(({ event, enqueue }) => enqueue.assign({ forgottenAt: event.at })),
        },
      },
    },
    // Final: its account holds no such device any more, so retired, loading as `unassigned` (naming no account) is
    // exactly what it already is to a lookup (device_unknown).
    forgotten: {
      on: { 'device.assign': { actions: emit({ type: 'device.taken' }) } },
    },
    lapsed: {
      on: { 'device.assign': { actions: emit({ type: 'device.taken' }) } },
    },
  },
});

/** The enrolment's deadline, while the device may lapse. */
export function deviceTimers(context: DeviceContext): Record<string, number> {
  return context.expiresAt == null ? {} : { enrolment: context.expiresAt };
}
