import type { ActorStore, CommitEntry, JournalRecord } from '../storage/actor-store.js';
import { actorId } from '../storage/actor-store.js';

/** What a lane tells an activation about the writes it queued. */
export interface CommitParticipant {
  readonly id: string;
  readonly kind: string;
  readonly key: string;
  readonly epoch: number;
  committed(version: number): void;
  fenced(): void;
  commitFailed(error: unknown): void;
}

export interface CommitObserver {
  batchCommitted(actors: number, events: number, durationMs: number): void;
  batchFailed(actors: number, error: unknown): void;
}

interface Pending {
  readonly participant: CommitParticipant;
  readonly baseVersion: number;
  version: number;
  snapshot: unknown;
  timers: Readonly<Record<string, number>>;
  readonly journal: JournalRecord[];
}

/**
 * Group commit. Each actor always uses the same lane, and a lane has at most one batch in flight, so an actor's
 * batches commit in order; while a batch is in flight the next one gathers every write queued meanwhile, which is what
 * keeps throughput near the store's multi-row speed instead of its single-commit speed. Several lanes let several
 * batches share the disk's flushes.
 */
export class CommitLanes {
  readonly #lanes: CommitLane[];

  constructor(store: ActorStore, options: { lanes: number; maxBatchActors: number; observer?: CommitObserver }) {
    this.#lanes = Array.from(
      { length: Math.max(1, options.lanes) },
      () => new CommitLane(store, options.maxBatchActors, options.observer),
    );
  }

  enqueue(participant: CommitParticipant, update: {
    baseVersion: number;
    version: number;
    snapshot: unknown;
    timers: Readonly<Record<string, number>>;
    record: JournalRecord;
  }): void {
    this.#laneOf(participant.id).enqueue(participant, update);
  }

  /** Forgets queued, not yet sent, writes of a participant that has stopped. */
  drop(participant: CommitParticipant): void {
    this.#laneOf(participant.id).drop(participant);
  }

  get idle(): boolean {
    return this.#lanes.every((lane) => lane.idle);
  }

  #laneOf(id: string): CommitLane {
    let hash = 2166136261;
    for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 16777619);
    return this.#lanes[(hash >>> 0) % this.#lanes.length]!;
  }
}

class CommitLane {
  readonly #store: ActorStore;
  readonly #maxBatchActors: number;
  readonly #observer: CommitObserver | undefined;
  readonly #queued = new Map<CommitParticipant, Pending>();
  #inFlight = false;
  #scheduled = false;

  constructor(store: ActorStore, maxBatchActors: number, observer: CommitObserver | undefined) {
    this.#store = store;
    this.#maxBatchActors = maxBatchActors;
    this.#observer = observer;
  }

  get idle(): boolean {
    return !this.#inFlight && !this.#scheduled && this.#queued.size === 0;
  }

  enqueue(
    participant: CommitParticipant,
    update: { baseVersion: number; version: number; snapshot: unknown; timers: Readonly<Record<string, number>>; record: JournalRecord },
  ): void {
    const pending = this.#queued.get(participant);
    if (pending) {
      // Only the newest snapshot of an actor is written; every intermediate event still gets its journal row.
      pending.version = update.version;
      pending.snapshot = update.snapshot;
      pending.timers = update.timers;
      pending.journal.push(update.record);
    } else {
      this.#queued.set(participant, {
        participant,
        baseVersion: update.baseVersion,
        version: update.version,
        snapshot: update.snapshot,
        timers: update.timers,
        journal: [update.record],
      });
    }
    this.#schedule();
  }

  drop(participant: CommitParticipant): void {
    this.#queued.delete(participant);
  }

  #schedule(): void {
    if (this.#inFlight || this.#scheduled) return;
    this.#scheduled = true;
    // setImmediate, not a microtask: requests already read from sockets get to add their writes to this batch.
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    if (this.#inFlight || this.#queued.size === 0) return;
    const batch: Pending[] = [];
    for (const pending of this.#queued.values()) {
      batch.push(pending);
      if (batch.length >= this.#maxBatchActors) break;
    }
    for (const pending of batch) this.#queued.delete(pending.participant);
    this.#inFlight = true;
    const entries: CommitEntry[] = batch.map((p) => ({
      kind: p.participant.kind,
      key: p.participant.key,
      baseVersion: p.baseVersion,
      version: p.version,
      epoch: p.participant.epoch,
      snapshot: p.snapshot,
      timers: p.timers,
      journal: p.journal,
    }));
    const started = performance.now();
    try {
      const { fenced } = await this.#store.commit(entries);
      let events = 0;
      for (const p of batch) events += p.journal.length;
      this.#observer?.batchCommitted(batch.length, events, performance.now() - started);
      this.#inFlight = false;
      for (const p of batch) {
        if (fenced.has(actorId(p.participant.kind, p.participant.key))) p.participant.fenced();
        else p.participant.committed(p.version);
      }
    } catch (error) {
      this.#observer?.batchFailed(batch.length, error);
      this.#inFlight = false;
      for (const p of batch) p.participant.commitFailed(error);
    }
    if (this.#queued.size > 0) this.#schedule();
  }
}
