import { ENVIRONMENT_ID } from '../identity/environments.js';
import { defineActorKind, storedState, withContext, type ActorStateUpgrade } from './actor-kind.js';
import { mediaRoomMachine, type DeadlineChange } from '../machines/media-room/media-room.machine.js';
import { mediaRoomTimers } from '../machines/media-room/media-room.state.js';

export const MEDIA_ROOM_KIND = 'media-room';

/**
 * media-plugin.md: "Session state and invitations are ephemeral". A room's state is durable while it is used (a node
 * may restart under a meeting), not afterwards: its journal (who joined, raised a hand, was offered a seat) goes an
 * hour after its events once a snapshot covers it, and a room empty for an hour goes whole, whatever the server keeps
 * of other actors. The sweeps run every ten minutes (ended rooms) and hourly (journals), so "an hour" is at most two.
 */
export const MEDIA_ROOM_RETENTION = Object.freeze({ journalMs: 3600_000, endedMs: 3600_000 });

/**
 * A room key: the Environment id, a dot, and the connection's context scope (media-plugin.md: `scope` matches
 * `^[A-Za-z0-9][A-Za-z0-9:_-]{0,95}$`, which has no dot, so the key splits back unambiguously).
 */
export const MEDIA_ROOM_KEY = new RegExp(`^${ENVIRONMENT_ID.source.slice(1, -1)}\\.[A-Za-z0-9][A-Za-z0-9:_-]{0,95}$`);

export function mediaRoomKey(environmentId: string, scope: string): string {
  return `${environmentId}.${scope}`;
}

/**
 * Version 2: a room stored empty before `emptySince` existed gets it, from the row's stored time (when its last change
 * was stored, at or after it emptied), so it is retired like rooms emptied since. Events after the snapshot replay on
 * top: a join they hold clears it again, so a room they filled is not called ended.
 */
export const mediaRoomUpgrades: readonly ActorStateUpgrade[] = [
  {
    name: 'empty rooms get emptySince',
    snapshot: (snapshot, stored) => {
      const state = storedState(snapshot);
      const { members, emptySince } = state.context;
      if (emptySince !== undefined || !Array.isArray(members) || members.length > 0) return snapshot;
      return withContext(state, { emptySince: stored.storedAt });
    },
  },
];

/**
 * The Media plane's room kind. `changedByDeadline` runs after a room committed a change no request caused (a dropped
 * member's grace ended, a speaker offer expired), so the control plane can broadcast the view and close that member's
 * connection and media; it is bound late because the kind exists before the control plane it notifies.
 */
export function mediaRoomKind(changedByDeadline: (change: DeadlineChange) => void) {
  return defineActorKind({
    name: MEDIA_ROOM_KIND,
    machine: mediaRoomMachine.provide({
      actions: {
        changedByDeadline: (_, params) => changedByDeadline(params),
      },
    }),
    key: { pattern: MEDIA_ROOM_KEY, describe: 'the environment id, a dot, and the context scope' },
    input: (key: string) => ({ roomId: key, scope: key.slice(key.indexOf('.') + 1) }),
    stateVersion: 2,
    upgrades: mediaRoomUpgrades,
    timers: (snapshot) => mediaRoomTimers(snapshot.context),
    // An empty room's end; undone when someone joins. Retiring it loses nothing the next open does not set again.
    endedAt: (snapshot) => snapshot.context.emptySince ?? null,
    retention: MEDIA_ROOM_RETENTION,
  });
}
