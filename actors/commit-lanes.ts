import { CommitNotSentError, CommitStillRunningError, type ActorStore, type CommitEntry, type JournalRecord, type SnapshotWrite } from '../storage/actor-store.js';
import { answeredWithin, isStorageOutage } from '../storage/outage.js';

/** What a lane tells an activation about the writes it queued. */
export interface CommitParticipant {
  readonly id: string;
  readonly kind: string;
  readonly key: string;
  readonly epoch: number;
  /** The kind's state version its writes record. */
  readonly stateVersion: number;
  /** The participant's snapshot as of its newest queued version, for a write that carries one. */
  snapshotForCommit(): SnapshotWrite;
  committed(version: number): void;
  fenced(): void;
  commitFailed(error: unknown): void;
}

export interface CommitObserver {
  /** `snapshots`: how many of the batch's `actors` entries also stored their snapshot. */
  batchCommitted(actors: number, events: number, durationMs: number, snapshots: number): void;
  batchFailed(actors: number, error: unknown): void;
  /** `entries` writes of a committed batch were refused by the store's fence (their activations stop). */
  entriesFenced?(entries: number): void;
}

interface Pending {
  readonly participant: CommitParticipant;
  readonly baseVersion: number;
  version: number;
  withSnapshot: boolean;
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

  /**
   * `landedAskMs`: how long a lane whose commit's answer was lost keeps asking the store which entries landed, while
   * the store cannot say (LANDED_ASK_MS by default).
   */
  constructor(store: ActorStore, options: { lanes: number; maxBatchActors: number; observer?: CommitObserver; landedAskMs?: number }) {
    this.#lanes = Array.from(
      { length: Math.max(1, options.lanes) },
      () => new CommitLane(store, options.maxBatchActors, options.observer, options.landedAskMs ?? LANDED_ASK_MS),
    );
  }

  /** Queues the journal record of one new version; `withSnapshot`: this write must also store the snapshot. */
  enqueue(participant: CommitParticipant, baseVersion: number, record: JournalRecord, withSnapshot: boolean): void {
    this.#laneOf(participant.id).enqueue(participant, baseVersion, record, withSnapshot);
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

/**
 * How long a lane asks again which entries of a commit whose answer was lost landed, while the store cannot answer
 * that either. Failing those replies at once tells their senders to send again events that may be stored, which a
 * retry then applies twice; a Postgres restart or a dropped connection is over within seconds, and the truth with it.
 * Past this the replies fail as retryable (the known gap, now only for longer outages): the lane holds every other
 * write of its actors meanwhile, and a shutdown waits for it.
 */
export const LANDED_ASK_MS = 10_000;
const LANDED_FIRST_WAIT_MS = 100;
const LANDED_LONGEST_WAIT_MS = 2_000;

function snapshotAt(pending: Pending): SnapshotWrite {
  const snapshot = pending.participant.snapshotForCommit();
  // Every newer event of the actor would have joined this pending write, so its state is exactly this version.
  if (snapshot.version !== pending.version) {
    throw new Error(`snapshot of ${pending.participant.id} is at ${snapshot.version}, batch at ${pending.version}`);
  }
  return snapshot;
}

class CommitLane {
  readonly #store: ActorStore;
  readonly #maxBatchActors: number;
  readonly #observer: CommitObserver | undefined;
  readonly #landedAskMs: number;
  readonly #queued = new Map<CommitParticipant, Pending>();
  #inFlight = false;
  #scheduled = false;

  constructor(store: ActorStore, maxBatchActors: number, observer: CommitObserver | undefined, landedAskMs: number) {
    this.#store = store;
    this.#maxBatchActors = maxBatchActors;
    this.#observer = observer;
    this.#landedAskMs = landedAskMs;
  }

  get idle(): boolean {
    return !this.#inFlight && !this.#scheduled && this.#queued.size === 0;
  }

  enqueue(participant: CommitParticipant, baseVersion: number, record: JournalRecord, withSnapshot: boolean): void {
    const pending = this.#queued.get(participant);
    if (pending) {
      pending.version = record.version;
      // The lane stores the newest snapshot of the batch when any of its writes asked for one.
      pending.withSnapshot ||= withSnapshot;
      pending.journal.push(record);
    } else {
      this.#queued.set(participant, { participant, baseVersion, version: record.version, withSnapshot, journal: [record] });
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
    let batch: Pending[] = [];
    for (const pending of this.#queued.values()) {
      batch.push(pending);
      if (batch.length >= this.#maxBatchActors) break;
    }
    for (const pending of batch) this.#queued.delete(pending.participant);
    this.#inFlight = true;
    // Every event of an actor gets its journal row; a snapshot, when one is due, is the newest state only.
    const entries: CommitEntry[] = [];
    let snapshots = 0;
    let unwritable: Pending[] | undefined;
    for (const p of batch) {
      const { kind, key, epoch, stateVersion } = p.participant;
      if (!p.withSnapshot) {
        entries.push({ kind, key, baseVersion: p.baseVersion, epoch, stateVersion, journal: p.journal });
        continue;
      }
      let snapshot: SnapshotWrite;
      try {
        // Kind code runs here (`ephemeral.forget`, `endedAt`): a fault in it is that actor's, not its batch's.
        snapshot = snapshotAt(p);
      } catch (error) {
        (unwritable ??= []).push(p);
        p.participant.commitFailed(error);
        continue;
      }
      snapshots++;
      entries.push({ kind, key, baseVersion: p.baseVersion, epoch, stateVersion, journal: p.journal, snapshot });
    }
    if (unwritable) batch = batch.filter((p) => !unwritable.includes(p));
    if (batch.length === 0) {
      this.#inFlight = false;
      if (this.#queued.size > 0) this.#schedule();
      return;
    }
    const started = performance.now();
    try {
      const { fenced } = await this.#store.commit(entries);
      let events = 0;
      for (const p of batch) events += p.journal.length;
      this.#observer?.batchCommitted(batch.length, events, performance.now() - started, snapshots);
      if (fenced.size > 0) this.#observer?.entriesFenced?.(fenced.size);
      this.#inFlight = false;
      batch.forEach((p, i) => {
        if (fenced.has(i)) p.participant.fenced();
        else p.participant.committed(p.version);
      });
    } catch (thrown) {
      // A rejection may be a lost answer to a commit that applied (the connection broke after Postgres committed, the
      // client's query timeout fired while the commit waited for its flush): failing those replies would tell their
      // senders to send again events that are stored. The lane stays in flight while it asks, so no later write of
      // these actors goes first; if the store cannot say within LANDED_ASK_MS, the writes count as failed.
      const notSent = thrown instanceof CommitNotSentError;
      const error = notSent ? thrown.cause : thrown;
      const landed = notSent ? new Set<number>() : await this.#whichLanded(entries);
      if (landed.size === 0) this.#observer?.batchFailed(batch.length, error);
      else {
        let events = 0;
        for (const [i, p] of batch.entries()) if (landed.has(i)) events += p.journal.length;
        this.#observer?.batchCommitted(landed.size, events, performance.now() - started, snapshots);
      }
      this.#inFlight = false;
      batch.forEach((p, i) => {
        if (landed.has(i)) p.participant.committed(p.version);
        else p.participant.commitFailed(error);
      });
    }
    if (this.#queued.size > 0) this.#schedule();
  }

  /** `landed`, asked again with growing waits while the store is out, for `#landedAskMs` at most; none when it never says. */
  async #whichLanded(entries: readonly CommitEntry[]): Promise<ReadonlySet<number>> {
    const deadline = performance.now() + this.#landedAskMs;
    for (let wait = LANDED_FIRST_WAIT_MS; ; wait = Math.min(wait * 2, LANDED_LONGEST_WAIT_MS)) {
      const left = deadline - performance.now();
      // A store that does not answer at all (a silent host) would hold the lane for its query timeout, past the bound.
      try {
        return await answeredWithin(this.#store.landed(entries), left, 'which entries of a commit landed');
      } catch (error) {
        // Anything but an outage (a silent store included) or a commit still running, a fault of the statement, will
        // not answer differently later.
        if (!isStorageOutage(error) && !(error instanceof CommitStillRunningError)) return new Set();
      }
      // The last question is asked at the bound, not given up one wait before it.
      const pause = Math.min(wait, deadline - performance.now());
      if (pause <= 0) return new Set();
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
