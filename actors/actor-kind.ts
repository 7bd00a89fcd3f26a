import type { AnyStateMachine, EventObject, InputFrom, SnapshotFrom } from 'xstate';

/**
 * An actor kind: an XState machine, how its key is formed, and the host policies that apply to it.
 *
 * Every event a machine receives carries `at`, the host clock's time in ms when the event was accepted, so machines
 * read time from events and stay pure. Durable timers are deadlines kept in machine context: `timers` reads them from
 * a snapshot, and when one falls due the host sends `{ type: 'timer.due', name, dueAt }` (at least once: a machine
 * clears or moves the deadline when it handles it).
 */
export interface ActorKind<TMachine extends AnyStateMachine = AnyStateMachine> {
  readonly name: string;
  readonly machine: TMachine;
  readonly key: ActorKeyRule;
  readonly input?: (key: string) => InputFrom<TMachine>;
  /** Durable deadlines (name → due time in ms) held by this snapshot; a value that is not a number is a fault, as a throw. */
  readonly timers?: (snapshot: SnapshotFrom<TMachine>) => Readonly<Record<string, number>>;
  /**
   * What of an event the journal keeps; secrets an event carries must not reach operators or audit. A kind that
   * redacts cannot be rebuilt by replaying its journal, so the host stores its snapshot with every event.
   */
  readonly journalView?: (event: EventObject) => unknown;
  /**
   * When this snapshot's actor ended its life (ms), or null while it lives. Every write that ends, undoes or follows an
   * end stores the snapshot with it, and an actor still ended ACTOR_ENDED_RETENTION_DAYS after its end is removed,
   * snapshot and journal (storage/postgres/actor-retirement.ts): afterwards it loads as never written. So a kind
   * declares it only where a never-written actor may stand for an ended one (an id nobody reuses; an empty room).
   * An activation whose state has ended passivates its idle time after its load or latest commit, reads or not, so
   * a node holding it when it is retired answers as never written within that time.
   */
  readonly endedAt?: (snapshot: SnapshotFrom<TMachine>) => number | null;
  /**
   * Events whose effect lasts only as long as the activation (what a page shows others while its socket is open):
   * handled in arrival order with the others, never journaled, and answered without a commit of their own (a reply
   * still waits for the commits of the events before it). `forget` clears what they change from a state, and the host
   * applies it to every snapshot it stores and every state it restores, so a reload never brings back a stale value.
   * The journal replays without them, so nothing they change may influence how another event is handled. One that
   * would change a durable timer or run an effect is journaled like any other event.
   */
  readonly ephemeral?: {
    readonly events: ReadonlySet<string>;
    readonly forget: (snapshot: SnapshotFrom<TMachine>) => SnapshotFrom<TMachine>;
  };
  readonly policy?: Partial<ActorPolicy>;
  /**
   * History this kind keeps for less than the server's retention (ACTOR_JOURNAL_RETENTION_DAYS and
   * ACTOR_ENDED_RETENTION_DAYS, whichever is shorter applies, also when those are 0, "keep"): `journalMs` after their
   * events for covered journal segments, `endedMs` after its end for the whole actor (a kind with `endedAt`). For
   * state a contract calls ephemeral: an operator's setting may keep other history longer, not this.
   */
  readonly retention?: ActorRetention;
}

export interface ActorRetention {
  readonly journalMs?: number;
  readonly endedMs?: number;
}

export interface ActorKeyRule {
  /** Keys that do not match are refused before anything is loaded. */
  readonly pattern: RegExp;
  /** How the key is formed, for errors and operators: e.g. "session id (ses_ + 26 base32 characters)". */
  readonly describe: string;
}

export interface ActorPolicy {
  /** Idle time after which a live actor leaves memory; it returns from its snapshot on next use. */
  readonly passivateAfterMs: number;
  /** Events accepted but not yet committed that one actor may hold before senders are told to back off. */
  readonly maxPendingEvents: number;
  /** A snapshot is stored at least every this many events; loading replays at most this many journal rows. */
  readonly snapshotEvery: number;
}

export const defaultActorPolicy: ActorPolicy = Object.freeze({
  passivateAfterMs: 5 * 60_000,
  maxPendingEvents: 1_000,
  snapshotEvery: 64,
});

export interface TimerDueEvent {
  readonly type: 'timer.due';
  readonly name: string;
  readonly dueAt: number;
  readonly at: number;
}

export function defineActorKind<TMachine extends AnyStateMachine>(kind: ActorKind<TMachine>): ActorKind<TMachine> {
  if (!/^[a-z][a-z0-9-]{0,62}$/.test(kind.name)) throw new Error(`actor kind name "${kind.name}" is not kebab-case`);
  for (const [name, ms] of Object.entries(kind.retention ?? {})) {
    if (!Number.isSafeInteger(ms) || ms <= 0) throw new Error(`actor kind ${kind.name}: retention.${name} must be a positive whole number of ms`);
  }
  if (kind.retention?.endedMs !== undefined && !kind.endedAt) throw new Error(`actor kind ${kind.name}: retention.endedMs needs endedAt`);
  return Object.freeze(kind);
}
