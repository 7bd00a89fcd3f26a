import { createActor, initialTransition, type AnyActorScope, type AnyMachineSnapshot, type EventObject } from 'xstate';
import { stateVersionOf, type ActorKind, type ActorPolicy, type ActorStateUpgrade } from './actor-kind.js';
import type { CommitLanes, CommitParticipant } from './commit-lanes.js';
import type { Clock, TimerHandle } from './clock.js';
import {
  ActorCommitFailedError,
  ActorEventRejectedError,
  ActorFencedError,
  ActorOverloadedError,
  ActorRestoreError,
  ActorStorageUnavailableError,
  type ActorHostError,
} from './errors.js';
import { StoredActorInconsistentError, type SnapshotWrite, type StoredActor } from '../storage/actor-store.js';

/**
 * Why an activation left memory. `nothing_stored`: the store held nothing for its key and its events wrote nothing (a
 * read of an actor never created), so it left right after its replies.
 */
export type StopReason = 'passivated' | 'nothing_stored' | 'fenced' | 'commit_failed' | 'load_failed';

/** What the sender of an event gets back, once the state it produced is committed. */
export interface ActorReply {
  readonly version: number;
  /** The machine snapshot right after this event. */
  readonly snapshot: AnyMachineSnapshot;
  /** Events the machine emitted while handling this event. */
  readonly emitted: readonly EventObject[];
  /**
   * False when the event changed nothing (ignored, or only answered with emitted events): nothing was journaled. True
   * for an ephemeral event's change, which is not journaled either.
   */
  readonly changed: boolean;
}

/** How an activation reaches the rest of the host; keeps this class free of the host's maps and loops. */
export interface ActivationContext {
  readonly clock: Clock;
  readonly lanes: CommitLanes;
  readonly policy: ActorPolicy;
  /** Called once for every delivered event, when its reply is released or refused. */
  settled(): void;
  /** Called once when the activation stops; `written` says whether its epoch reached the store. */
  stopped(activation: Activation, written: boolean, reason: StopReason): void;
  timerDue(activation: Activation, name: string, dueAt: number): void;
  /** The stored snapshot's timers or end are not those its state holds (see ActorStore.replaceTimers). */
  timersStale(activation: Activation, snapshotVersion: number, timers: Readonly<Record<string, number>>, endedAt: number | null): void;
  warn(message: string, details: Record<string, unknown>): void;
  effectFailed(activation: Activation, error: unknown): void;
}

/**
 * One delivered event from the mailbox until its reply is released or refused: one object per event, filled in as it
 * goes (with 256 events in flight, every per-event allocation shows up in the garbage collector's time).
 */
interface Request {
  readonly event: EventObject;
  readonly resolve: (reply: ActorReply) => void;
  readonly reject: (error: ActorHostError) => void;
  reply: ActorReply | undefined;
  effects: readonly ExecutableAction[];
}

interface ExecutableAction {
  readonly type: string;
  readonly info: unknown;
  readonly params: unknown;
  readonly exec: ((info: never, params: unknown) => void) | undefined;
}

const NO_TIMERS: Readonly<Record<string, number>> = Object.freeze({});
const NONE: readonly never[] = Object.freeze([]);

function sameTimers(a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): boolean {
  if (a === b) return true;
  const names = Object.keys(a);
  if (names.length !== Object.keys(b).length) return false;
  return names.every((name) => a[name] === b[name]);
}

/**
 * The kind's durable deadlines for this state. A deadline that is not a number of ms is a fault of the kind's code, as
 * a throw is: typically a context field an older state lacks, read as undefined, which would be armed to fire at once
 * (`setTimeout` takes NaN as 1 ms) and meet a guard comparing it with the same undefined field.
 */
export function kindTimers(definition: ActorKind, snapshot: AnyMachineSnapshot): Readonly<Record<string, number>> {
  const timers = definition.timers?.(snapshot as never) ?? NO_TIMERS;
  for (const name in timers) {
    const dueAt: unknown = timers[name];
    if (typeof dueAt !== 'number' || !Number.isFinite(dueAt)) throw new Error(`timer ${name} of actor kind ${definition.name} is due at ${String(dueAt)}, not a time in ms`);
  }
  return timers;
}

/**
 * An actor scope that collects the actions a transition asks for instead of running them, as XState's own pure
 * `transition()` does, but built once per activation rather than once per event.
 */
function inertScope(self: AnyActorScope['self'], sink: { actions: ExecutableAction[] }): AnyActorScope {
  return {
    self,
    id: '',
    sessionId: '',
    system: self.system,
    logger: () => {},
    defer: () => {},
    emit: () => {},
    stopChild: () => {},
    actionExecutor: (action) => void sink.actions.push(action as ExecutableAction),
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function eventType(event: unknown): string {
  const type = typeof event === 'object' && event !== null ? (event as { type?: unknown }).type : undefined;
  return typeof type === 'string' ? type : 'no type';
}

/**
 * What a row or segment written at `stored` state version reads as now, through the kind's steps (`step` picks the
 * snapshot's or the event's function of each). What a newer build wrote is refused, never guessed at: a rollback must
 * not rebuild a state its machine reads differently.
 */
function upgraded(
  definition: ActorKind,
  stored: number,
  what: () => string,
  value: unknown,
  step: (upgrade: ActorStateUpgrade) => ((value: unknown) => unknown) | undefined,
): unknown {
  const current = stateVersionOf(definition);
  if (stored === current) return value;
  if (stored > current) {
    throw new Error(`${what()} was written at state version ${stored} of ${definition.name}, newer than this build's ${current}: a newer release wrote it`);
  }
  for (let from = stored; from < current; from++) {
    const upgrade = definition.upgrades![from - 1]!;
    const apply = step(upgrade);
    if (!apply) continue;
    try {
      value = apply(value);
    } catch (error) {
      throw new Error(`upgrade step ${from}→${from + 1} (${upgrade.name}) of ${definition.name} threw on ${what()}: ${describe(error)}`, { cause: error });
    }
  }
  return value;
}

/**
 * Rebuilds the committed state: the stored snapshot (or the initial state) with the journal after it replayed, each
 * first brought up to the kind's state version from the one it was written at. The replayed events' effects ran when
 * they were first handled, so only state is rebuilt. Throws when what is stored does not fit the machine (a snapshot
 * it cannot read, a journaled event it no longer handles, a version it does not know, a step that throws): that does
 * not restore.
 */
export function restoreCommitted(
  definition: ActorKind,
  key: string,
  stored: StoredActor | undefined,
): { snapshot: AnyMachineSnapshot; scope: { readonly scope: AnyActorScope; readonly sink: { actions: ExecutableAction[] } } } {
  const machine = definition.machine;
  const input = definition.input?.(key);
  const current = stateVersionOf(definition);
  let persisted: unknown;
  if (stored) {
    const facts = { key, version: stored.snapshotVersion, storedAt: stored.updatedAt.getTime() };
    persisted = upgraded(definition, stored.stateVersion, () => `the snapshot at version ${stored.snapshotVersion}`, stored.snapshot, (u) => u.snapshot && ((s) => u.snapshot!(s, facts)));
  }
  const self = createActor(machine, stored ? { snapshot: persisted as never, input } : { input });
  const sink: { actions: ExecutableAction[] } = { actions: [] };
  const scope = inertScope(self, sink);
  let snapshot = stored ? (self.getSnapshot() as AnyMachineSnapshot) : initialTransition(machine, input)[0];
  // XState answers a snapshot it cannot read (one naming a state the machine no longer has) with an error snapshot, not
  // a throw; live, that refused every event with an unrelated TypeError, and the operator view called it restored.
  if (snapshot.status === 'error') throw new Error(`stored snapshot at version ${stored?.snapshotVersion} does not fit the machine: ${describe(snapshot.error)}`);
  for (const record of stored?.tail ?? []) {
    sink.actions = [];
    // Most records are of the kind's current version: no closure or message built for them.
    const event =
      record.stateVersion === current
        ? record.event
        : upgraded(definition, record.stateVersion, () => `the journal entry at version ${record.version} (${eventType(record.event)})`, record.event, (u) =>
            u.event && ((e) => u.event!(e, { key, version: record.version, at: record.at })),
          );
    const next = machine.transition(snapshot, event as never, scope) as AnyMachineSnapshot;
    // Only events that changed the state or asked for actions were journaled. One the machine now ignores (renamed,
    // no longer accepted there) would drop a committed change from the rebuilt state without a trace.
    if (next === snapshot && sink.actions.length === 0) {
      throw new Error(`journal entry at version ${record.version} (${eventType(event)}) changes nothing when replayed: the machine no longer handles it as it did`);
    }
    snapshot = next;
  }
  // Journals and snapshots written before a kind declared an event ephemeral may still hold what it changed.
  if (definition.ephemeral) snapshot = definition.ephemeral.forget(snapshot as never) as AnyMachineSnapshot;
  return { snapshot, scope: { scope, sink } };
}

/**
 * One live actor: a mailbox handled one event at a time in arrival order, the current snapshot, and the replies
 * waiting for their commit. Events are applied as soon as they arrive (pipelined), but a reply is released only when
 * the commit that holds its version succeeds, so nobody ever sees state that could still be lost.
 */
export class Activation implements CommitParticipant {
  readonly id: string;
  readonly kind: string;
  readonly key: string;
  /** The kind's state version, which this activation's writes record. */
  readonly stateVersion: number;
  #epoch = 0;
  #status: 'loading' | 'live' | 'stopped' = 'loading';
  #snapshot: AnyMachineSnapshot | undefined;
  #version = 0;
  #committedVersion = 0;
  #writtenThisEpoch = false;
  /** Whether any write of this activation was queued: until then the store cannot come to hold its epoch. */
  #sentWrites = false;
  /** The store held nothing for this key when it loaded: until a write, its state is the machine's initial one. */
  #nothingStored = false;
  /** Version of the newest stored snapshot; the journal after it is replayed on load. */
  #snapshotVersion = 0;
  /** Durable timers of the current state, and (serialised) those of the stored snapshot. */
  #timersNow: Readonly<Record<string, number>> = NO_TIMERS;
  #timersStored: Readonly<Record<string, number>> = NO_TIMERS;
  /** One actor scope reused for every transition: building one per event is most of XState's cost. */
  #scope: { readonly scope: AnyActorScope; readonly sink: { actions: ExecutableAction[] } } | undefined;
  #lastActivity: number;
  /**
   * Whether the current state has ended (the kind's `endedAt`), and when this activation last met the store (its load,
   * its latest commit): an ended actor may be retired beneath it, so only that, not reads, keeps it in memory.
   */
  #ended = false;
  #lastStored: number;
  readonly #activatedAt: number;
  readonly #mailbox: Request[] = [];
  /** Requests handled, in version order, whose reply waits for its version to commit. */
  readonly #waiting: Request[] = [];
  readonly #timers = new Map<string, { dueAt: number; handle: TimerHandle }>();
  /** `name@dueAt` of timers already delivered by this activation, so an unhandled one is not re-fired in a loop. */
  readonly #fired = new Set<string>();
  readonly #definition: ActorKind;
  readonly #ctx: ActivationContext;

  constructor(definition: ActorKind, key: string, id: string, ctx: ActivationContext) {
    this.#definition = definition;
    this.kind = definition.name;
    this.key = key;
    this.stateVersion = stateVersionOf(definition);
    this.id = id;
    this.#ctx = ctx;
    this.#activatedAt = ctx.clock.now();
    this.#lastActivity = this.#activatedAt;
    this.#lastStored = this.#activatedAt;
  }

  get epoch(): number {
    return this.#epoch;
  }
  get status(): 'loading' | 'live' | 'stopped' {
    return this.#status;
  }
  get version(): number {
    return this.#version;
  }
  get committedVersion(): number {
    return this.#committedVersion;
  }
  get snapshot(): AnyMachineSnapshot | undefined {
    return this.#snapshot;
  }
  get lastActivity(): number {
    return this.#lastActivity;
  }
  /**
   * Since when this activation counts as idle for passivation: its last event, or, once its state has ended, its load
   * or latest commit. Retirement removes an ended actor from the store whatever memory holds; an activation kept alive
   * by reads alone would answer that removed state for as long as someone reads it (a retired Runtime session as
   * released instead of unknown, a retired room as still there). So an ended actor leaves within its idle time after
   * it last met the store, and the next read loads what the store holds now.
   */
  get idleSince(): number {
    return this.#ended ? this.#lastStored : this.#lastActivity;
  }
  get activatedAt(): number {
    return this.#activatedAt;
  }
  get pending(): number {
    return this.#mailbox.length + this.#waiting.length;
  }
  get sentWrites(): boolean {
    return this.#sentWrites;
  }
  get armedTimers(): ReadonlyMap<string, number> {
    return new Map([...this.#timers].map(([name, t]) => [name, t.dueAt]));
  }

  /**
   * Completes activation with what the store holds (or nothing) and the epoch ownership granted. Returns the failure
   * when that state does not restore (the activation has then stopped, its events refused with it).
   */
  load(stored: StoredActor | undefined, epoch: number): ActorRestoreError | undefined {
    if (this.#status !== 'loading') return undefined;
    let timersNow: Readonly<Record<string, number>>;
    try {
      const restored = restoreCommitted(this.#definition, this.key, stored);
      this.#scope = restored.scope;
      const snapshot = restored.snapshot;
      this.#snapshot = snapshot;
      // Kind code reading the restored state: a state it cannot read does not restore (no retry mends it), which is
      // not the storage outage the host would otherwise take the throw for.
      timersNow = this.#timersOf(snapshot);
    } catch (error) {
      const failure = new ActorRestoreError(this.id, error);
      this.#fail(failure, false, 'load_failed');
      return failure;
    }
    this.#epoch = epoch;
    this.#version = stored?.version ?? 0;
    this.#committedVersion = this.#version;
    this.#snapshotVersion = stored?.snapshotVersion ?? 0;
    this.#timersStored = stored?.timers ?? NO_TIMERS;
    this.#timersNow = timersNow;
    let endedAt: number | null | undefined;
    try {
      endedAt = this.#endedAt(this.#snapshot!);
    } catch {
      // Only passivation reads this here: an endedAt that cannot read the state refuses the next write that needs it.
      endedAt = undefined;
    }
    this.#ended = endedAt != null;
    this.#lastStored = this.#ctx.clock.now();
    this.#status = 'live';
    // A row an older build stored may lack an end or a deadline its upgraded state holds (retirement and the poller
    // read the row, not the state) or hold one it does not.
    if (stored && (!sameTimers(this.#timersNow, this.#timersStored) || (endedAt !== undefined && endedAt !== stored.endedAt))) {
      // #timersStored stays as loaded, so this activation's next write stores a snapshot anyway if the repair fails.
      this.#ctx.timersStale(this, this.#snapshotVersion, this.#timersNow, endedAt === undefined ? stored.endedAt : endedAt);
    }
    this.#nothingStored = stored === undefined;
    this.#armTimers(this.#timersNow);
    const queued = this.#mailbox.splice(0);
    for (const item of queued) this.#handle(item);
    this.#leaveIfNothingStored();
    return undefined;
  }

  loadFailed(error: unknown): void {
    // A store that answered with what cannot be a state is not an outage: a retry would only meet it again.
    const failure = error instanceof StoredActorInconsistentError ? new ActorRestoreError(this.id, error) : new ActorStorageUnavailableError(this.id, error);
    this.#fail(failure, false, 'load_failed');
  }

  /** Queues or handles the event; the context's `settled` is called once, when the reply is released or refused. */
  deliver(event: EventObject): Promise<ActorReply> {
    return new Promise<ActorReply>((resolve, reject) => {
      const request: Request = { event, resolve, reject, reply: undefined, effects: NONE };
      if (this.#status === 'loading') {
        if (this.#mailbox.length >= this.#ctx.policy.maxPendingEvents) {
          this.#refuse(request, new ActorOverloadedError(this.id, this.#ctx.policy.maxPendingEvents));
          return;
        }
        this.#mailbox.push(request);
      } else if (this.#status === 'live') {
        this.#handle(request);
        this.#leaveIfNothingStored();
      } else {
        // Only the host delivers, and it never delivers to a stopped activation; guard against misuse anyway.
        this.#refuse(request, new ActorFencedError(this.id));
      }
    });
  }

  #release(request: Request, reply: ActorReply): void {
    this.#ctx.settled();
    request.resolve(reply);
  }

  #refuse(request: Request, error: ActorHostError): void {
    this.#ctx.settled();
    request.reject(error);
  }

  #handle(request: Request): void {
    if (this.#waiting.length >= this.#ctx.policy.maxPendingEvents) {
      this.#refuse(request, new ActorOverloadedError(this.id, this.#ctx.policy.maxPendingEvents));
      return;
    }
    const now = this.#ctx.clock.now();
    this.#lastActivity = now;
    const stamped = { ...request.event, at: now } as EventObject;
    const current = this.#snapshot!;
    let next: AnyMachineSnapshot;
    let actions: readonly ExecutableAction[];
    try {
      [next, actions] = this.#transition(current, stamped);
    } catch (error) {
      this.#refuse(request, new ActorEventRejectedError(this.id, error));
      return;
    }
    if (next === current && actions.every((action) => action.type === 'xstate.emit')) {
      // Ignored, or only answered (a refusal, a read): nothing to journal, since replaying it would change nothing, but
      // the reply still reports state, so it waits until that state is durable. Journaled, every refused request cost a
      // write as an accepted one does (an enrolling device polling its completion, a pending device's wrong proofs).
      const emitted = actions.length === 0 ? NONE : actions.map((action) => (action.params as { event: EventObject }).event);
      request.reply = { version: this.#version, snapshot: current, emitted, changed: false };
      this.#awaitCommit(request);
      return;
    }
    let emitted: EventObject[] | undefined;
    let effects: ExecutableAction[] | undefined;
    for (const action of actions) {
      if (action.type === 'xstate.emit') (emitted ??= []).push((action.params as { event: EventObject }).event);
      else if (action.type === 'xstate.raise' || action.type === 'xstate.cancel') {
        // Delayed events would vanish with a restart or passivation: kinds declare deadlines as durable timers instead.
        this.#ctx.warn('machine uses a delayed event, which the host does not keep; use a durable timer', {
          actor: this.id,
          action: action.type,
        });
      } else if (action.type.startsWith('xstate.')) {
        this.#ctx.warn('machine action is not supported by the actor host', { actor: this.id, action: action.type });
      } else (effects ??= []).push(action);
    }
    // Kind code (timers, endedAt, journalView) runs before anything of this activation changes: a fault in it refuses
    // this event like a machine that throws. Thrown later, it would escape the reply's promise unsettled (drain would
    // wait for it for ever) and leave a version that no write carries (the next write would be fenced).
    let timers: Readonly<Record<string, number>>;
    let endedNext: number | null;
    let endedBefore: number | null;
    try {
      timers = this.#timersOf(next);
      endedNext = this.#endedAt(next);
      endedBefore = this.#endedAt(current);
    } catch (error) {
      this.#refuse(request, new ActorEventRejectedError(this.id, error));
      return;
    }
    if (
      effects === undefined &&
      this.#definition.ephemeral?.events.has(stamped.type) &&
      sameTimers(timers, this.#timersNow) &&
      endedNext === endedBefore
    ) {
      this.#snapshot = next;
      request.reply = { version: this.#version, snapshot: next, emitted: emitted ?? NONE, changed: true };
      this.#awaitCommit(request);
      return;
    }
    let journaled: unknown;
    try {
      journaled = this.#definition.journalView?.(stamped) ?? stamped;
    } catch (error) {
      this.#refuse(request, new ActorEventRejectedError(this.id, error));
      return;
    }
    const baseVersion = this.#version;
    this.#version = baseVersion + 1;
    this.#snapshot = next;
    this.#timersNow = timers;
    this.#ended = endedNext !== null;
    // Every write that ends, undoes or follows an end stores the snapshot with it: retirement finds ended actors by the
    // snapshot row alone, and a write to the row (which retirement locks) orders this commit with a retirement under
    // way, so it can never leave a journal segment behind an actor retired beneath it.
    const withSnapshot = this.#snapshotDue(timers) || endedNext !== null || endedBefore !== null;
    if (withSnapshot) {
      // What the store will hold once this write commits (a failed commit stops the activation): the next write
      // compares its timers with these, not with an older committed snapshot's, so a change made while this one is
      // in flight is stored too.
      this.#snapshotVersion = this.#version;
      this.#timersStored = timers;
    }
    this.#sentWrites = true;
    this.#ctx.lanes.enqueue(
      this,
      baseVersion,
      { version: this.#version, event: journaled, at: now },
      withSnapshot,
    );
    this.#armTimers(timers);
    request.reply = { version: this.#version, snapshot: next, emitted: emitted ?? NONE, changed: true };
    request.effects = effects ?? NONE;
    this.#awaitCommit(request);
  }

  /**
   * A snapshot goes with this write when the activation has not yet written one (that write claims its epoch in the
   * store), when the journal since the last one is long, when durable timers changed (they are stored with the
   * snapshot), or when the kind redacts its journal (which then cannot be replayed).
   */
  #snapshotDue(timers: Readonly<Record<string, number>>): boolean {
    return (
      !this.#writtenThisEpoch ||
      this.#version - this.#snapshotVersion >= this.#ctx.policy.snapshotEvery ||
      this.#definition.journalView !== undefined ||
      !sameTimers(timers, this.#timersStored)
    );
  }

  snapshotForCommit(): SnapshotWrite {
    const ephemeral = this.#definition.ephemeral;
    const write = {
      version: this.#version,
      snapshot: this.#definition.machine.getPersistedSnapshot(ephemeral ? ephemeral.forget(this.#snapshot! as never) : this.#snapshot!),
      timers: this.#timersNow,
    };
    const endedAt = this.#endedAt(this.#snapshot!);
    return endedAt === null ? write : { ...write, endedAt };
  }

  #endedAt(snapshot: AnyMachineSnapshot): number | null {
    return this.#definition.endedAt?.(snapshot as never) ?? null;
  }

  #transition(current: AnyMachineSnapshot, event: EventObject): [AnyMachineSnapshot, ExecutableAction[]] {
    const { scope, sink } = this.#scope!;
    sink.actions = [];
    const next = this.#definition.machine.transition(current, event as never, scope) as AnyMachineSnapshot;
    return [next, sink.actions];
  }

  #timersOf(snapshot: AnyMachineSnapshot): Readonly<Record<string, number>> {
    return kindTimers(this.#definition, snapshot);
  }

  #awaitCommit(request: Request): void {
    if (request.reply!.version <= this.#committedVersion && this.#waiting.length === 0) {
      this.#release(request, request.reply!);
      return;
    }
    this.#waiting.push(request);
  }

  committed(version: number): void {
    if (this.#status !== 'live') return;
    this.#committedVersion = version;
    this.#writtenThisEpoch = true;
    let released = 0;
    while (released < this.#waiting.length && this.#waiting[released]!.reply!.version <= version) released++;
    for (const request of this.#waiting.splice(0, released)) {
      // Effects run after the commit and at most once: a crash between commit and effect loses the effect.
      for (const effect of request.effects) {
        try {
          effect.exec?.(effect.info as never, effect.params);
        } catch (error) {
          this.#ctx.effectFailed(this, error);
        }
      }
      this.#release(request, request.reply!);
    }
    this.#lastActivity = this.#ctx.clock.now();
    this.#lastStored = this.#lastActivity;
  }

  fenced(): void {
    this.#fail(new ActorFencedError(this.id), this.#writtenThisEpoch, 'fenced');
  }

  commitFailed(error: unknown): void {
    this.#fail(new ActorCommitFailedError(this.id, error), this.#writtenThisEpoch, 'commit_failed');
  }

  /**
   * Leaves memory at once when the store holds nothing for this key, no event of this activation wrote anything, and
   * nothing is pending: a read of an actor that was never created. Keeping it until passivation would let anyone who
   * can name keys (junk device ids in unauthenticated assertions, made-up session ids) hold one activation each in
   * memory. Nothing is lost by leaving: its state is the machine's initial one, which the next activation rebuilds from
   * the same empty store. An activation whose initial state holds a deadline stays, so that timer still fires.
   *
   * Called only where the mailbox has just been handled (never between two queued events), so events still reach one
   * activation at a time in arrival order; with no write, every reply was released synchronously before this runs.
   */
  #leaveIfNothingStored(): void {
    if (
      this.#status === 'live' &&
      this.#nothingStored &&
      !this.#sentWrites &&
      this.#mailbox.length === 0 &&
      this.#waiting.length === 0 &&
      Object.keys(this.#timersNow).length === 0
    ) {
      this.#stop(false, 'nothing_stored');
    }
  }

  /** Leaves memory; nothing uncommitted may be pending (the host passivates only idle activations). */
  passivate(): void {
    if (this.#status === 'stopped') return;
    this.#stop(this.#writtenThisEpoch, 'passivated');
  }

  #fail(error: ActorHostError, written: boolean, reason: StopReason): void {
    if (this.#status === 'stopped') return;
    const waiting = this.#waiting.splice(0);
    const queued = this.#mailbox.splice(0);
    this.#stop(written, reason);
    for (const request of waiting) this.#refuse(request, error);
    for (const request of queued) this.#refuse(request, error);
  }

  #stop(written: boolean, reason: StopReason): void {
    this.#status = 'stopped';
    for (const timer of this.#timers.values()) this.#ctx.clock.clearTimeout(timer.handle);
    this.#timers.clear();
    this.#ctx.lanes.drop(this);
    this.#ctx.stopped(this, written, reason);
  }

  #armTimers(timers: Readonly<Record<string, number>>): void {
    if (timers === NO_TIMERS && this.#timers.size === 0 && this.#fired.size === 0) return;
    for (const [name, armed] of this.#timers) {
      if (timers[name] !== armed.dueAt) {
        this.#ctx.clock.clearTimeout(armed.handle);
        this.#timers.delete(name);
      }
    }
    // Only deadlines the state still holds need remembering as delivered: a live actor that keeps moving its
    // deadline would otherwise keep one entry for every deadline it ever had.
    for (const fired of this.#fired) {
      const at = fired.lastIndexOf('@');
      if (timers[fired.slice(0, at)] !== Number(fired.slice(at + 1))) this.#fired.delete(fired);
    }
    const now = this.#ctx.clock.now();
    for (const [name, dueAt] of Object.entries(timers)) {
      if (this.#timers.has(name) || this.#fired.has(`${name}@${dueAt}`)) continue;
      if (dueAt <= now) {
        // Overdue (found after a restart or passivation): deliver now, after the current event, not via the clock.
        this.#fired.add(`${name}@${dueAt}`);
        queueMicrotask(() => this.#fireTimer(name, dueAt));
        continue;
      }
      this.#timers.set(name, { dueAt, handle: this.#ctx.clock.setTimeout(() => this.#fireTimer(name, dueAt), dueAt - now) });
    }
  }

  #fireTimer(name: string, dueAt: number): void {
    // Only the entry of this deadline: an overdue one found on load fires from a microtask, after the events queued
    // behind the load may have moved the deadline and armed the new one under the same name.
    if (this.#timers.get(name)?.dueAt === dueAt) this.#timers.delete(name);
    this.#fired.add(`${name}@${dueAt}`);
    if (this.#status === 'live') this.#ctx.timerDue(this, name, dueAt);
  }

  /**
   * The timer's delivery was refused while this activation stays live (its mailbox was full): it is delivered again
   * after `delayMs`, as long as the state still holds that deadline. Nothing else would: the poller leaves live
   * actors to their own timers.
   */
  timerRefused(name: string, dueAt: number, delayMs: number): void {
    if (this.#status !== 'live' || this.#timersNow[name] !== dueAt || this.#timers.has(name)) return;
    this.#fired.delete(`${name}@${dueAt}`);
    this.#timers.set(name, { dueAt, handle: this.#ctx.clock.setTimeout(() => this.#fireTimer(name, dueAt), delayMs) });
  }
}
