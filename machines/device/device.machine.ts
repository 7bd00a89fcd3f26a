import { emit, enqueueActions, setup } from 'xstate';

/**
 * Which account a device id belongs to. Assertions name only their device (`kid`), so no account id ever travels in
 * them or in enrolment answers; the first assignment is final.
 */
export type DeviceEvent = { readonly type: 'device.assign'; readonly accountId: string; readonly at: number };

export type DeviceEmitted =
  | { readonly type: 'device.assigned'; readonly accountId: string }
  | { readonly type: 'device.taken' };

export interface DeviceContext {
  readonly accountId: string | null;
}

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
            enqueue.assign({ accountId: event.accountId });
            enqueue.emit({ type: 'device.assigned', accountId: event.accountId });
          }),
        },
      },
    },
    assigned: {
      on: { 'device.assign': { actions: emit({ type: 'device.taken' }) } },
    },
  },
});
