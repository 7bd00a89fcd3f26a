import { assign, emit, setup } from 'xstate';

/**
 * Who a handle belongs to. A handle is reserved for a new account while its first device enrols, bound when that
 * enrolment completes, and released if it expires first, so two people can never end up with the same handle. A bind
 * always says how it ended (`handle.bound`, or `handle.taken` by whom): the account's completion, which sends it,
 * must know whether the handle is really its own. A bind of a free handle claims it: the reservation of an account
 * whose completion committed but whose bind did not (a crash between them) may have lapsed before the retry.
 */
export type AccountHandleEvent =
  | {
      readonly type: 'handle.reserve';
      readonly accountId: string;
      readonly expiresAt: number;
      /** An account known to have been abandoned: its reservation is taken over before it lapses. */
      readonly replaces?: string;
      readonly at: number;
    }
  | { readonly type: 'handle.bind'; readonly accountId: string; readonly at: number }
  | { readonly type: 'timer.due'; readonly name: string; readonly dueAt: number; readonly at: number };

export type AccountHandleEmitted =
  | { readonly type: 'handle.reserved'; readonly accountId: string }
  | { readonly type: 'handle.bound'; readonly accountId: string }
  | { readonly type: 'handle.taken'; readonly accountId: string; readonly bound: boolean };

export interface AccountHandleContext {
  readonly accountId: string | null;
  readonly reservedUntil: number | null;
  /**
   * When a lapsed reservation left the handle free: its end, for a free handle is what a never-written one is. Null
   * once reserved or bound again; absent on handles stored before it was kept.
   */
  readonly freedAt?: number | null;
}

/** Leaving `free` undoes its end; a handle never freed keeps the shape it always had. */
const undoEnd = (context: AccountHandleContext): Partial<AccountHandleContext> => (context.freedAt == null ? {} : { freedAt: null });

export const accountHandleMachine = setup({
  types: {
    context: {} as AccountHandleContext,
    events: {} as AccountHandleEvent,
    emitted: {} as AccountHandleEmitted,
  },
}).createMachine({
  id: 'account-handle',
  context: { accountId: null, reservedUntil: null },
  initial: 'free',
  states: {
    free: {
      on: {
        'handle.reserve': {
          target: 'reserved',
          actions: [
            assign(({ context, event }) => ({ accountId: event.accountId, reservedUntil: event.expiresAt, ...undoEnd(context) })),
            emit(({ event }) => ({ type: 'handle.reserved', accountId: event.accountId })),
          ],
        },
        'handle.bind': {
          target: 'bound',
          actions: [
            assign(({ context, event }) => ({ accountId: event.accountId, reservedUntil: null, ...undoEnd(context) })),
            emit(({ event }) => ({ type: 'handle.bound', accountId: event.accountId })),
          ],
        },
      },
    },
    reserved: {
      on: {
        'handle.reserve': [
          {
            // Past its deadline the reservation has lapsed, even before its timer is delivered: the handle is free.
            guard: ({ context, event }) => event.at >= context.reservedUntil!,
            target: 'reserved',
            reenter: true,
            actions: [
              assign(({ event }) => ({ accountId: event.accountId, reservedUntil: event.expiresAt })),
              emit(({ event }) => ({ type: 'handle.reserved', accountId: event.accountId })),
            ],
          },
          {
            // The holder was abandoned (its first enrolment lapsed, so it can never complete): the margin the
            // reservation keeps for a completion's bind serves nobody, and the person may start again at once.
            guard: ({ context, event }) => event.replaces !== undefined && event.replaces === context.accountId,
            target: 'reserved',
            reenter: true,
            actions: [
              assign(({ event }) => ({ accountId: event.accountId, reservedUntil: event.expiresAt })),
              emit(({ event }) => ({ type: 'handle.reserved', accountId: event.accountId })),
            ],
          },
          { actions: emit(({ context }) => ({ type: 'handle.taken', accountId: context.accountId!, bound: false })) },
        ],
        'handle.bind': [
          {
            guard: ({ context, event }) => context.accountId === event.accountId,
            target: 'bound',
            actions: [assign({ reservedUntil: null }), emit(({ event }) => ({ type: 'handle.bound', accountId: event.accountId }))],
          },
          { actions: emit(({ context }) => ({ type: 'handle.taken', accountId: context.accountId!, bound: false })) },
        ],
        'timer.due': {
          guard: ({ context, event }) => event.name === 'reservation' && event.dueAt === context.reservedUntil,
          target: 'free',
          actions: assign(({ event }) => ({ accountId: null, reservedUntil: null, freedAt: event.at })),
        },
      },
    },
    bound: {
      on: {
        'handle.reserve': {
          actions: emit(({ context }) => ({ type: 'handle.taken', accountId: context.accountId!, bound: true })),
        },
        'handle.bind': {
          actions: emit(({ context, event }) =>
            context.accountId === event.accountId
              ? { type: 'handle.bound', accountId: event.accountId }
              : { type: 'handle.taken', accountId: context.accountId!, bound: true },
          ),
        },
      },
    },
  },
});

export function accountHandleTimers(context: AccountHandleContext): Record<string, number> {
  return context.reservedUntil === null ? {} : { reservation: context.reservedUntil };
}
