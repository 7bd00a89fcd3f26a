import { enqueueActions, setup } from 'xstate';
import type { MediaRoomEmitted, MediaRoomEvent, RoomChange } from './media-room.events.js';
import { deadlinePassed, decide } from './media-room.rules.js';
import { emptyRoom, withEmptiness, type MediaRoomContext, type MediaRoomInput } from './media-room.state.js';

/**
 * One media room (a configured space or a direct call of an Environment), keyed `<environmentId>.<scope>`: the
 * authority on who is in it, who holds a speaker seat, the raised hands, the speaker offers and the screen share.
 * The media itself (mediasoup) follows what this machine decides; see README.md beside this file for every rule.
 *
 * States: `unopened` (only `room.open` is accepted) → `open` (every request; deadlines run). The room never closes:
 * an empty room costs only its snapshot, the next `room.open` of an empty room may bring a new policy, and a room
 * empty for the retention period is retired (`emptySince`), to be opened afresh when someone comes back.
 */
export interface DeadlineChange {
  readonly roomId: string;
  readonly revision: number;
  readonly changes: readonly RoomChange[];
}

export const mediaRoomMachine = setup({
  types: {
    context: {} as MediaRoomContext,
    events: {} as MediaRoomEvent,
    emitted: {} as MediaRoomEmitted,
    input: {} as MediaRoomInput,
  },
  guards: {
    opened: ({ context }) => context.policy !== null,
    deadlineHolds: ({ context, event }) => event.type === 'timer.due' && deadlinePassed(context, event) !== null,
  },
  actions: {
    /**
     * After the commit of a change that no request caused (a grace ended, an offer expired): nobody awaits a reply
     * then, so the control plane learns it here. Provided by the media kind.
     */
    changedByDeadline: (_, _params: DeadlineChange) => {},
  },
}).createMachine({
  id: 'media-room',
  context: ({ input }) => emptyRoom(input),
  initial: 'unopened',
  on: {
    'timer.due': {
      guard: 'deadlineHolds',
      actions: enqueueActions(({ context, event, enqueue }) => {
        const outcome = event.type === 'timer.due' ? deadlinePassed(context, event) : null;
        if (!outcome) return;
        const { revision } = outcome.context;
        enqueue.assign(withEmptiness(context, outcome.context, event.at));
        enqueue.emit({ type: 'room.changed', revision, changes: outcome.changes });
        enqueue({ type: 'changedByDeadline', params: { roomId: context.roomId, revision, changes: outcome.changes } });
      }),
    },
    '*': {
      actions: enqueueActions(({ context, event, enqueue }) => {
        if (event.type === 'timer.due') return;
        const decision = decide(context, event);
        if (!decision.ok) {
          enqueue.emit({ type: 'room.refused', request: event.type, code: decision.code, message: decision.message });
          return;
        }
        const { revision } = decision.context;
        // The context also moves without a change members see (a hosting renewal).
        if (decision.context !== context) enqueue.assign(withEmptiness(context, decision.context, event.at));
        enqueue.emit({ type: 'room.reply', revision, ...decision.reply });
        if (decision.changes.length > 0) enqueue.emit({ type: 'room.changed', revision, changes: decision.changes });
      }),
    },
  },
  states: {
    // Every request before `room.open` is answered `room_not_open` by the rules.
    unopened: { always: { guard: 'opened', target: 'open' } },
    open: {},
  },
});
