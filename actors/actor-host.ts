import type { AnyMachineSnapshot, EventObject } from 'xstate';
import { defaultActorPolicy, stateVersionOf, type ActorKind, type ActorPolicy, type TimerDueEvent } from './actor-kind.js';
import { Activation, kindTimers, restoreCommitted, type ActivationContext, type ActorReply, type StopReason } from './activation.js';
import { CommitLanes, type CommitObserver } from './commit-lanes.js';
import type { Clock, TimerHandle } from './clock.js';
import { ActorEventUnstorableError, ActorOverloadedError, ActorRestoreError, HostDrainingError, InvalidActorKeyError, UnknownActorKindError } from './errors.js';
import type { Ownership } from './ownership.js';
import { RestoreBackoff, type RestoreBackoffOptions } from './restore-backoff.js';
import { actorId, StoredActorInconsistentError, type ActorStore, type DueActor, type StoredActor, type StoredActorRow } from '../storage/actor-store.js';
import { unstorableTextAt } from '../storage/storable-text.js';
import { LogThrottle } from './log-throttle.js';

/** How soon a timer whose delivery a full mailbox refused is tried again. */
const TIMER_RETRY_MS = 1_000;
/** Due-timer rows read per page, and pages per poll (rows the poll skips must not hide the ones after them). */
const DUE_PAGE = 1_000;
const DUE_PAGES_PER_POLL = 20;

export interface HostObserver extends CommitObserver {
  activated(kind: string): void;
  deactivated(kind: string, reason: StopReason): void;
  eventAccepted(kind: string): void;
}

export interface HostLogger {
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
  info(details: Record<string, unknown>, message: string): void;
}

export interface ActorHostOptions {
  readonly store: ActorStore;
  readonly ownership: Ownership;
  readonly clock: Clock;
  readonly kinds: readonly ActorKind[];
  readonly logger: HostLogger;
  readonly observer?: HostObserver;
  readonly commitLanes?: number;
  readonly maxBatchActors?: number;
  /** How long a commit whose answer was lost waits for the store to say whether it landed (see CommitLanes). */
  readonly landedAskMs?: number;
  /** Default for kinds that do not set their own. */
  readonly passivateAfterMs?: number;
  /** How often the store is asked for timers falling due (also how far ahead it looks). */
  readonly timerPollMs?: number;
  /** How the poller waits before loading again an actor whose state did not restore (see RestoreBackoff). */
  readonly restoreBackoff?: RestoreBackoffOptions;
}

/** A live actor as operators see it. */
export interface LiveActorInfo {
  readonly kind: string;
  readonly key: string;
  readonly status: 'loading' | 'live' | 'stopped';
  readonly epoch: number;
  readonly version: number;
  readonly committedVersion: number;
  readonly state: unknown;
  readonly pendingEvents: number;
  readonly timers: Readonly<Record<string, string>>;
  readonly activatedAt: string;
  readonly lastActivityAt: string;
}

export interface LiveActorPage {
  readonly actors: readonly LiveActorInfo[];
  /** Live actors of the kinds asked for, on every page. */
  readonly total: number;
}

/**
 * The `count` smallest of `keys` above `floor`, in order: one pass, holding no more than `count` of them (a page of a
 * host with a million live actors must not sort them all).
 */
function smallestAfter(keys: Iterable<string>, floor: string | undefined, count: number): string[] {
  const best: string[] = [];
  if (count <= 0) return best;
  for (const key of keys) {
    if (floor !== undefined && key <= floor) continue;
    if (best.length === count && key >= best[count - 1]!) continue;
    let lo = 0;
    let hi = best.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (best[mid]! < key) lo = mid + 1;
      else hi = mid;
    }
    best.splice(lo, 0, key);
    if (best.length > count) best.pop();
  }
  return best;
}

export interface CommittedActorView {
  readonly restores: true;
  /** Newest committed version. */
  readonly version: number;
  /** Version of the stored snapshot the state was rebuilt from. */
  readonly snapshotVersion: number;
  readonly epoch: number;
  /** The kind's state version the stored snapshot was written at (the state is upgraded from it when lower). */
  readonly stateVersion: number;
  /** The committed state, as XState persists it. */
  readonly state: unknown;
  readonly timers: Readonly<Record<string, number>>;
  readonly updatedAt: Date;
}

/** What is stored for an actor whose state does not restore (the host refuses to activate it), and why. */
export interface UnrestorableActorView extends StoredActorRow {
  readonly restores: false;
  /** Why it does not restore (what the kind's code threw, what the machine no longer reads, or the store's inconsistency). */
  readonly reason: string;
  readonly cause: unknown;
}

/**
 * Hosts actors of every registered kind: gets or creates the one activation of a key, passes events to it, passivates
 * idle ones, fires durable timers (also for actors not in memory), and drains on shutdown. An activation that found
 * nothing stored and wrote nothing (a read of an actor never created) leaves memory right after its replies, so
 * reading made-up keys costs a store read each but holds no memory.
 */
export class ActorHost {
  readonly #store: ActorStore;
  readonly #ownership: Ownership;
  readonly #clock: Clock;
  readonly #logger: HostLogger;
  /** Failures that repeat alike (every activation while Postgres is gone, every request to a broken actor). */
  readonly #quiet: LogThrottle;
  readonly #observer: HostObserver | undefined;
  readonly #kinds = new Map<string, { kind: ActorKind; policy: ActorPolicy }>();
  /** Live activations by kind, then key: no per-event string building on the hot path. */
  readonly #live = new Map<string, Map<string, Activation>>();
  #liveCount = 0;
  readonly #lanes: CommitLanes;
  readonly #timerPollMs: number;
  #pendingReplies = 0;
  #draining = false;
  #idleWaiters: Array<() => void> = [];
  /** Stale stored timers being replaced (they never reject); drain waits for them. */
  readonly #timerRepairs = new Set<Promise<void>>();
  /** Actors whose state did not restore: the poller waits before loading them again, and logs them now and then. */
  readonly #restoreBackoff: RestoreBackoff;
  #pollHandle: TimerHandle | undefined;
  #sweepHandle: TimerHandle | undefined;
  #started = false;

  constructor(options: ActorHostOptions) {
    this.#store = options.store;
    this.#ownership = options.ownership;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#quiet = new LogThrottle(options.logger);
    this.#observer = options.observer;
    this.#timerPollMs = options.timerPollMs ?? 1_000;
    this.#restoreBackoff = new RestoreBackoff(options.restoreBackoff);
    const passivateAfterMs = options.passivateAfterMs ?? defaultActorPolicy.passivateAfterMs;
    for (const kind of options.kinds) {
      if (this.#kinds.has(kind.name)) throw new Error(`actor kind ${kind.name} registered twice`);
      this.#kinds.set(kind.name, { kind, policy: { ...defaultActorPolicy, passivateAfterMs, ...kind.policy } });
    }
    this.#lanes = new CommitLanes(options.store, {
      lanes: options.commitLanes ?? 2,
      maxBatchActors: options.maxBatchActors ?? 4_000,
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.landedAskMs === undefined ? {} : { landedAskMs: options.landedAskMs }),
    });
  }

  /** Starts the durable-timer poller and the passivation sweep. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#schedulePoll(0);
    this.#scheduleSweep();
  }

  get kinds(): readonly string[] {
    return [...this.#kinds.keys()];
  }

  /** The state version this build writes for `kind` (ActorKind.stateVersion). */
  kindStateVersion(kind: string): number {
    const registered = this.#kinds.get(kind);
    if (!registered) throw new UnknownActorKindError(kind);
    return stateVersionOf(registered.kind);
  }

  /**
   * Delivers an event to the actor `kind`/`key`, activating it if needed. Resolves once the state it produced is
   * committed; rejects with an ActorHostError (see `retryable`) otherwise.
   */
  send<E extends EventObject>(kind: string, key: string, event: E): Promise<ActorReply> {
    if (this.#draining) return Promise.reject(new HostDrainingError());
    const unstorable = unstorableTextAt(event);
    if (unstorable !== undefined) return Promise.reject(new ActorEventUnstorableError(`${kind}/${key}`, unstorable));
    let activation: Activation;
    try {
      activation = this.#activationFor(kind, key);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#pendingReplies++;
    this.#observer?.eventAccepted(kind);
    return activation.deliver(event);
  }

  /**
   * One page of live actors (optionally of one kind) in (kind, key) order, after `after` (the last actor of the
   * previous page); `total` counts them all. Costs a scan of the keys, not a description of every actor.
   */
  listPage(options: { readonly kind?: string; readonly limit: number; readonly after?: { readonly kind: string; readonly key: string } }): LiveActorPage {
    const { after, limit } = options;
    const kinds = options.kind !== undefined ? [options.kind] : [...this.#live.keys()].sort();
    const actors: LiveActorInfo[] = [];
    let total = 0;
    for (const kind of kinds) {
      const ofKind = this.#live.get(kind);
      if (!ofKind) continue;
      total += ofKind.size;
      if (actors.length === limit || (after && kind < after.kind)) continue;
      const keys = smallestAfter(ofKind.keys(), after?.kind === kind ? after.key : undefined, limit - actors.length);
      for (const key of keys) actors.push(this.#describe(ofKind.get(key)!));
    }
    return { actors, total };
  }

  /** Live actors by kind. */
  liveCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [kind, ofKind] of this.#live) if (ofKind.size > 0) counts.set(kind, ofKind.size);
    return counts;
  }

  /** Live actors, optionally of one kind (every one: for tests and small hosts; operators page with listPage). */
  list(kind?: string): LiveActorInfo[] {
    const out: LiveActorInfo[] = [];
    for (const a of this.#allLive()) {
      if (kind !== undefined && a.kind !== kind) continue;
      out.push(this.#describe(a));
    }
    return out;
  }

  /**
   * The state of a live actor when everything it holds is committed; undefined otherwise (not in memory, loading,
   * or with writes in flight), in which case send it an event it ignores to read its durable state.
   */
  peekCommitted(kind: string, key: string): AnyMachineSnapshot | undefined {
    const a = this.#live.get(kind)?.get(key);
    return a && a.status === 'live' && a.committedVersion === a.version ? a.snapshot : undefined;
  }

  /** The live view of one actor, if it is in memory. */
  inspect(kind: string, key: string): LiveActorInfo | undefined {
    const a = this.#live.get(kind)?.get(key);
    return a ? this.#describe(a) : undefined;
  }

  /**
   * The committed state of an actor as stored (snapshot plus replayed journal), whether or not it is in memory;
   * undefined when it has never been written. It does not activate the actor. Rejects with an ActorRestoreError when
   * that state does not restore (`inspectStored` answers what is stored then).
   */
  async readCommitted(kind: string, key: string): Promise<CommittedActorView | undefined> {
    const view = await this.inspectStored(kind, key);
    if (view?.restores === false) throw new ActorRestoreError(actorId(kind, key), view.cause);
    return view;
  }

  /**
   * For operators: `readCommitted`, except that an actor whose state does not restore, as an activation would find
   * (the journal has a gap, or kind code throws on the state while it is rebuilt or its timers are read), is answered
   * with what is stored and why rather than refused: that is when an operator needs to look.
   */
  async inspectStored(kind: string, key: string): Promise<CommittedActorView | UnrestorableActorView | undefined> {
    const registered = this.#kinds.get(kind);
    if (!registered) throw new UnknownActorKindError(kind);
    let stored: StoredActor | undefined;
    try {
      stored = await this.#store.load(kind, key);
    } catch (error) {
      if (!(error instanceof StoredActorInconsistentError)) throw error;
      if (!error.stored) throw new ActorRestoreError(actorId(kind, key), error);
      return { ...error.stored, restores: false, reason: error.message, cause: error };
    }
    if (!stored) return undefined;
    let state: unknown;
    try {
      const { snapshot } = restoreCommitted(registered.kind, key, stored);
      kindTimers(registered.kind, snapshot);
      state = registered.kind.machine.getPersistedSnapshot(snapshot);
    } catch (error) {
      const { snapshotVersion, version, epoch, snapshot, timers, stateVersion, updatedAt } = stored;
      const reason = error instanceof Error ? error.message : String(error);
      return { snapshotVersion, version, epoch, snapshot, timers, stateVersion, updatedAt, restores: false, reason, cause: error };
    }
    return {
      restores: true,
      version: stored.version,
      snapshotVersion: stored.snapshotVersion,
      epoch: stored.epoch,
      stateVersion: stored.stateVersion,
      state,
      timers: stored.timers,
      updatedAt: stored.updatedAt,
    };
  }

  get liveCount(): number {
    return this.#liveCount;
  }

  /** Actors whose latest load found a state that does not restore (held back from the poller; bounded). */
  get unrestorableCount(): number {
    return this.#restoreBackoff.size;
  }

  /**
   * Refuses new events, lets every accepted one reach its commit (or failure), then stops timers. Resolves when no
   * reply is outstanding and no write is queued.
   */
  async drain(): Promise<void> {
    this.#draining = true;
    if (this.#pollHandle) this.#clock.clearTimeout(this.#pollHandle);
    if (this.#sweepHandle) this.#clock.clearTimeout(this.#sweepHandle);
    while (this.#pendingReplies > 0 || !this.#lanes.idle) {
      await new Promise<void>((resolve) => {
        this.#idleWaiters.push(resolve);
        // Lanes settle without a reply outstanding only in rare orders; re-check soon rather than miss it.
        setTimeout(resolve, 20).unref();
      });
    }
    await Promise.all(this.#timerRepairs);
    for (const a of [...this.#allLive()]) a.passivate();
  }

  readonly #settled = (): void => {
    if (--this.#pendingReplies === 0) this.#notifyIdle();
  };

  #notifyIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  #activationFor(kindName: string, key: string): Activation {
    const registered = this.#kinds.get(kindName);
    if (!registered) throw new UnknownActorKindError(kindName);
    let ofKind = this.#live.get(kindName);
    const live = ofKind?.get(key);
    if (live) return live;
    if (!registered.kind.key.pattern.test(key)) throw new InvalidActorKeyError(kindName, key);
    const activation = new Activation(registered.kind, key, actorId(kindName, key), this.#activationContext(registered.policy));
    if (!ofKind) this.#live.set(kindName, (ofKind = new Map()));
    ofKind.set(key, activation);
    this.#liveCount++;
    this.#observer?.activated(kindName);
    void this.#load(activation);
    return activation;
  }

  async #load(activation: Activation): Promise<void> {
    let claimed = 0;
    try {
      const stored = await this.#store.load(activation.kind, activation.key);
      claimed = await this.#ownership.claim(activation.kind, activation.key, stored?.epoch ?? 0);
      const failure = activation.load(stored, claimed);
      if (failure) this.#restoreFailed(activation, failure);
      else if (activation.status !== 'stopped') this.#restoreBackoff.restored(activation.id);
    } catch (error) {
      // Each request to any actor while Postgres is gone fails its activation alike: one line. A state that does not
      // restore is logged by the backoff, only now and then.
      if (error instanceof StoredActorInconsistentError) this.#restoreFailed(activation, error);
      else this.#quiet.say('warn', `activation\u0000${faultCode(error)}`, { actor: activation.id.replace('\u0000', '/'), err: error }, 'actor activation failed');
      activation.loadFailed(error);
    } finally {
      // An epoch the activation never took (its state did not restore, or drain stopped it while it loaded): nothing
      // was sent under it, so ownership need not remember it. One it took is released when the activation stops.
      if (claimed > 0 && activation.epoch !== claimed) this.#ownership.release(activation.kind, activation.key, claimed, 'unused');
    }
  }

  /**
   * The stored state does not restore: no retry mends it until an operator or a new build does. The poller waits
   * before loading it again; the failure is logged the first time, then now and then with its count.
   */
  #restoreFailed(activation: Activation, error: Error): void {
    const now = this.#clock.now();
    const { failures, retryAt, log } = this.#restoreBackoff.failed(activation.id, now);
    if (!log) return;
    const details = { actor: `${activation.kind}/${activation.key}`, err: error, failures, retryInMs: retryAt - now };
    this.#logger.error(details, failures === 1 ? 'stored actor cannot be restored' : 'stored actor still cannot be restored');
  }

  #activationContext(policy: ActorPolicy): ActivationContext {
    return {
      clock: this.#clock,
      lanes: this.#lanes,
      policy,
      settled: this.#settled,
      stopped: (activation, written, reason) => {
        const ofKind = this.#live.get(activation.kind);
        if (ofKind?.get(activation.key) === activation) {
          ofKind.delete(activation.key);
          this.#liveCount--;
        }
        // An activation that never sent a write cannot come to hold its epoch in the store: forget it like a written one.
        if (activation.epoch > 0) {
          const outcome = written ? 'stored' : activation.sentWrites ? 'unsettled' : 'unused';
          this.#ownership.release(activation.kind, activation.key, activation.epoch, outcome);
        }
        this.#observer?.deactivated(activation.kind, reason);
        // Leaving because nothing is stored is as ordinary as passivating (and strangers can cause it at will): not
        // logged. A failed load is logged where it failed (a state that does not restore only now and then).
        if (reason !== 'passivated' && reason !== 'nothing_stored' && reason !== 'load_failed') {
          this.#quiet.say('warn', `stopped\u0000${reason}`, { actor: `${activation.kind}/${activation.key}`, reason }, 'actor activation stopped');
        }
      },
      timerDue: (activation, name, dueAt) => {
        const event: Omit<TimerDueEvent, 'at'> = { type: 'timer.due', name, dueAt };
        this.send(activation.kind, activation.key, event).catch((error: unknown) => {
          this.#quiet.say('warn', `timer delivery\u0000${faultCode(error)}`, { actor: `${activation.kind}/${activation.key}`, timer: name, err: error }, 'timer delivery failed');
          // A full mailbox refuses it while the actor stays live: try again shortly. Any other failure stops the
          // activation; the deadline stays in the snapshot, so the poller delivers it after the actor reloads.
          if (error instanceof ActorOverloadedError) activation.timerRefused(name, dueAt, TIMER_RETRY_MS);
        });
      },
      timersStale: (activation, snapshotVersion, timers, endedAt) => {
        const repair = this.#store
          .replaceTimers(activation.kind, activation.key, activation.epoch, snapshotVersion, timers, endedAt)
          .then(
            (applied) => this.#logger.info({ actor: `${activation.kind}/${activation.key}`, timers, endedAt, applied }, 'stored timers replaced by those of the state'),
            (error: unknown) => this.#logger.warn({ actor: `${activation.kind}/${activation.key}`, err: error }, 'cannot replace stale stored timers'),
          )
          .finally(() => this.#timerRepairs.delete(repair));
        this.#timerRepairs.add(repair);
      },
      warn: (message, details) => this.#logger.warn(details, message),
      effectFailed: (activation, error) =>
        this.#logger.error({ actor: `${activation.kind}/${activation.key}`, err: error }, 'actor effect failed'),
    };
  }

  #schedulePoll(delay: number): void {
    if (this.#draining) return;
    this.#pollHandle = this.#clock.setTimeout(() => void this.#pollTimers(), delay);
  }

  async #pollTimers(): Promise<void> {
    try {
      // Look one poll interval ahead: actors activated now arm their own precise timers. Rows are paged past the
      // ones skipped (live actors, kinds this node does not host, keys that cannot be activated), which would
      // otherwise fill every page and hide the due actors after them.
      const now = this.#clock.now();
      const before = now + this.#timerPollMs;
      let after: DueActor | undefined;
      for (let page = 0; page < DUE_PAGES_PER_POLL && !this.#draining; page++) {
        const due = await this.#store.dueActors(before, DUE_PAGE, after);
        for (const { kind, key } of due) {
          if (this.#draining) break;
          if (!this.#kinds.has(kind) || this.#live.get(kind)?.has(key)) continue;
          if (this.#restoreBackoff.size > 0 && this.#restoreBackoff.waiting(actorId(kind, key), now)) continue;
          try {
            this.#activationFor(kind, key);
          } catch (error) {
            this.#logger.warn({ actor: `${kind}/${key}`, err: error }, 'cannot activate actor with due timer');
          }
        }
        if (due.length < DUE_PAGE) break;
        after = due.at(-1);
      }
    } catch (error) {
      this.#quiet.say('warn', 'timer poll', { err: error }, 'timer poll failed');
    }
    this.#schedulePoll(this.#timerPollMs);
  }

  #scheduleSweep(): void {
    let shortest = Infinity;
    for (const { policy } of this.#kinds.values()) shortest = Math.min(shortest, policy.passivateAfterMs);
    if (shortest === Infinity) return;
    const interval = Math.max(250, Math.min(shortest / 2, 30_000));
    this.#sweepHandle = this.#clock.setTimeout(() => {
      this.#sweep();
      if (!this.#draining) this.#scheduleSweep();
    }, interval);
  }

  #sweep(): void {
    const now = this.#clock.now();
    for (const activation of [...this.#allLive()]) {
      const policy = this.#kinds.get(activation.kind)!.policy;
      if (activation.status === 'live' && activation.pending === 0 && now - activation.idleSince >= policy.passivateAfterMs) {
        activation.passivate();
      }
    }
  }

  *#allLive(): Iterable<Activation> {
    for (const ofKind of this.#live.values()) yield* ofKind.values();
  }

  #describe(a: Activation): LiveActorInfo {
    return {
      kind: a.kind,
      key: a.key,
      status: a.status,
      epoch: a.epoch,
      version: a.version,
      committedVersion: a.committedVersion,
      state: a.snapshot?.value ?? null,
      pendingEvents: a.pending,
      timers: Object.fromEntries([...a.armedTimers].map(([name, due]) => [name, new Date(due).toISOString()])),
      activatedAt: new Date(a.activatedAt).toISOString(),
      lastActivityAt: new Date(a.lastActivity).toISOString(),
    };
  }
}

/** What tells two failures apart for the log's throttle: a Postgres or Node code, else the error's name. */
function faultCode(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : typeof error;
}
