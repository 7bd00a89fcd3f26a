import { initialTransition, transition, type SnapshotFrom } from 'xstate';
import type {
  MediaRoomChanged,
  MediaRoomEmitted,
  MediaRoomEvent,
  MediaRoomRefusalCode,
  MediaRoomReply,
  MediaRoomRequest,
} from '../../machines/media-room/media-room.events.js';
import { mediaRoomMachine } from '../../machines/media-room/media-room.machine.js';
import type { RoomPolicy } from '../../machines/media-room/media-room.policy.js';
import type { MediaRoomContext, RoomMember } from '../../machines/media-room/media-room.state.js';

type WithoutAt<E> = E extends unknown ? Omit<E, 'at'> : never;
export type RoomEventInput = WithoutAt<MediaRoomEvent>;
export type RoomRequestInput = WithoutAt<MediaRoomRequest>;

export const T0 = Date.parse('2026-03-01T10:00:00Z');
export const ENV = 'media-test-world';

export function meetingPolicy(overrides: Partial<RoomPolicy> = {}): RoomPolicy {
  return {
    mode: 'meeting',
    maxParticipants: 10,
    maxSpeakerSeats: 2,
    floorControl: 'moderated',
    raiseHand: 'enabled',
    screenShare: 'speakers',
    guestPolicy: 'allowed',
    encryption: 'transport',
    reconnectGraceSeconds: 30,
    ...overrides,
  };
}

export function directCallPolicy(overrides: Partial<RoomPolicy> = {}): RoomPolicy {
  return {
    mode: 'direct_call',
    maxParticipants: 2,
    maxSpeakerSeats: 2,
    floorControl: 'open',
    raiseHand: 'disabled',
    screenShare: 'disabled',
    guestPolicy: 'callee_only',
    encryption: 'sfu_blind',
    spatialAudio: 'disabled',
    reconnectGraceSeconds: 10,
    ...overrides,
  };
}

export interface Handled {
  readonly emitted: readonly MediaRoomEmitted[];
  /** Named side-effect actions the transition asked for (not run: the machine is driven purely). */
  readonly effects: readonly { readonly type: string; readonly params: unknown }[];
  /** False when the transition returned the very same snapshot. */
  readonly changedSnapshot: boolean;
}

/**
 * Drives the pure machine with xstate's `transition()`, stamping each event with a clock the test moves by hand, and
 * reads replies as the control plane would.
 */
export class PureRoom {
  snapshot: SnapshotFrom<typeof mediaRoomMachine>;
  now = T0;

  constructor(policy?: RoomPolicy, scope = 'lobby') {
    [this.snapshot] = initialTransition(mediaRoomMachine, { roomId: `${ENV}.${scope}`, scope });
    if (policy) this.ok({ type: 'room.open', policy });
  }

  get context(): MediaRoomContext {
    return this.snapshot.context;
  }

  member(memberId: string): RoomMember | undefined {
    return this.context.members.find((m) => m.memberId === memberId);
  }

  advance(ms: number): this {
    this.now += ms;
    return this;
  }

  send(event: RoomEventInput): Handled {
    const [next, actions] = transition(mediaRoomMachine, this.snapshot, { ...event, at: this.now } as MediaRoomEvent);
    const changedSnapshot = next !== this.snapshot;
    this.snapshot = next;
    const emitted: MediaRoomEmitted[] = [];
    const effects: { type: string; params: unknown }[] = [];
    // xstate's action typing omits built-ins such as `xstate.emit`; read them as the host does.
    for (const action of actions as readonly { type: string; params: unknown }[]) {
      if (action.type === 'xstate.emit') emitted.push((action.params as { event: MediaRoomEmitted }).event);
      else effects.push({ type: action.type, params: action.params });
    }
    return { emitted, effects, changedSnapshot };
  }

  /** Sends a request that must be accepted; returns its reply and the change it broadcast (if any). */
  ok<R extends RoomRequestInput>(request: R): { reply: Extract<MediaRoomReply, { request: R['type'] }>; changed: MediaRoomChanged | undefined } {
    const { emitted } = this.send(request);
    const reply = emitted.find((e): e is MediaRoomReply => e.type === 'room.reply');
    if (!reply) throw new Error(`${request.type} was not accepted: ${JSON.stringify(emitted)}`);
    if (reply.request !== request.type) throw new Error(`reply to ${reply.request}, expected ${request.type}`);
    const changed = emitted.find((e): e is MediaRoomChanged => e.type === 'room.changed');
    return { reply: reply as Extract<MediaRoomReply, { request: R['type'] }>, changed };
  }

  /** Sends a request that must be refused, and checks that it changed nothing; returns the refusal code. */
  refused(request: RoomRequestInput): MediaRoomRefusalCode {
    const before = this.snapshot;
    const { emitted } = this.send(request);
    const refusal = emitted.find((e) => e.type === 'room.refused');
    if (!refusal || refusal.type !== 'room.refused' || emitted.length !== 1) {
      throw new Error(`${request.type} was not refused: ${JSON.stringify(emitted)}`);
    }
    if (this.snapshot.context !== before.context) throw new Error(`refused ${request.type} changed the context`);
    if (refusal.request !== request.type) throw new Error(`refusal names ${refusal.request}, expected ${request.type}`);
    return refusal.code;
  }

  join(memberId: string, options: { moderator?: boolean; guest?: boolean; connectionId?: string; displayName?: string; maySpeak?: boolean } = {}) {
    return this.ok({
      type: 'member.join',
      memberId,
      displayName: options.displayName ?? memberId.toUpperCase(),
      guest: options.guest ?? false,
      moderator: options.moderator ?? false,
      ...(options.maySpeak === undefined ? {} : { maySpeak: options.maySpeak }),
      connectionId: options.connectionId ?? `conn-${memberId}`,
    }).reply;
  }

  seats(): Record<string, number | null> {
    return Object.fromEntries(this.context.members.map((m) => [m.memberId, m.seat]));
  }

  handQueue(): string[] {
    return this.context.hands.map((h) => h.memberId);
  }
}
