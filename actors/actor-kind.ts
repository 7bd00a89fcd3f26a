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
  /**
   * Version of what this kind stores, 1 unless declared. Every snapshot row and journal segment records the version
   * it was written at; loading brings older ones up to this one through `upgrades`, and refuses to restore what a
   * newer build wrote (a rollback must never misread it). Raise it, with a step, whenever what older releases stored
   * would read differently now (a context field the machine or `timers` now needs, a renamed event).
   */
  readonly stateVersion?: number;
  /** `upgrades[n - 1]` turns what version n stored into what version n + 1 stores: exactly `stateVersion - 1` steps. */
  readonly upgrades?: readonly ActorStateUpgrade[];
}

/**
 * One version step of a kind's stored state. Pure: no I/O, no clock, no randomness, and the value given is not changed
 * (return a new one). A time a step needs comes from what the store knows (`storedAt`, an event's `at`): the same
 * row upgrades the same way on every load until a write stores it at the new version. A step that throws fails the
 * restore, naming the step, as a state the machine cannot read does.
 */
export interface ActorStateUpgrade {
  /** What it repairs, in a few words: named in the restore's failure. */
  readonly name: string;
  /** A persisted snapshot (as `machine.getPersistedSnapshot` wrote it) of the version before, as this version stores it. */
  readonly snapshot?: (snapshot: unknown, stored: StoredSnapshotFacts) => unknown;
  /** A journaled event (as `journalView` kept it) of the version before, as this version journals it. */
  readonly event?: (event: unknown, stored: StoredEventFacts) => unknown;
}

export interface StoredSnapshotFacts {
  readonly key: string;
  /** The actor's version the snapshot holds. */
  readonly version: number;
  /** When the snapshot row was last written (ms, the store's clock): at or after every event the snapshot holds. */
  readonly storedAt: number;
}

export interface StoredEventFacts {
  readonly key: string;
  readonly version: number;
  /** When the event was accepted (ms, the host clock). */
  readonly at: number;
}

/** A stored snapshot as an upgrade step reads it: XState's persisted fields with the context as stored. */
export interface StoredState {
  readonly value: unknown;
  readonly context: Readonly<Record<string, unknown>>;
  readonly [field: string]: unknown;
}

/** `snapshot` as a `StoredState`; throws (failing the restore, naming the step) when it is not one. */
export function storedState(snapshot: unknown): StoredState {
  const context = typeof snapshot === 'object' && snapshot !== null ? (snapshot as { context?: unknown }).context : undefined;
  if (typeof context !== 'object' || context === null || Array.isArray(context)) throw new Error('the stored snapshot has no context object');
  return snapshot as StoredState;
}

/** `state` with `context` merged over its context: what a step that adds or repairs context fields returns. */
export function withContext(state: StoredState, context: Readonly<Record<string, unknown>>): StoredState {
  return { ...state, context: { ...state.context, ...context } };
}

/** The version a kind's writes record. */
export function stateVersionOf(kind: ActorKind): number {
  return kind.stateVersion ?? 1;
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
  const version = stateVersionOf(kind);
  if (!Number.isSafeInteger(version) || version < 1) throw new Error(`actor kind ${kind.name}: stateVersion must be a whole number from 1`);
  if ((kind.upgrades?.length ?? 0) !== version - 1) throw new Error(`actor kind ${kind.name}: stateVersion ${version} needs ${version - 1} upgrade steps, has ${kind.upgrades?.length ?? 0}`);
  return Object.freeze(kind);
}
