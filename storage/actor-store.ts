/**
 * Where actor state lives. The journal is the write-ahead record: every accepted event with its time and resulting
 * version (stored one row per actor per commit), so every version is durable the moment its commit does. Snapshots
 * are written now and then (and whenever the host needs one: the first write of an activation, which claims its epoch,
 * or a change of durable timers); loading reads the snapshot and replays the journal after it. The host talks only to
 * this interface; `storage/postgres` fills it.
 */
export interface ActorStore {
  load(kind: string, key: string): Promise<StoredActor | undefined>;
  /**
   * Writes many actors' progress as one atomic statement. An entry applies only if the stored snapshot's epoch is not
   * newer than the entry's and the journal ends exactly at `baseVersion`; entries that fail that fence are left out
   * (with their journal and snapshot) and listed, by position, in `fenced`. The rest commit together or, on
   * error, not at all (the promise rejects), except that a rejection can also be a lost answer to a commit that
   * applied (the connection broke after Postgres committed): `landed` tells which. A rejection with
   * `CommitNotSentError` is one whose statement never left for the store: none of its entries landed.
   */
  commit(entries: readonly CommitEntry[]): Promise<CommitOutcome>;
  /**
   * Positions in `entries` (a batch whose `commit` rejected) of the entries the store holds: their journal segment is
   * stored at their first version, under their epoch and ending at their last version. An activation's segment is the
   * only one that can match (an epoch is granted to one activation, and one that sent writes is never granted again).
   * Rejects with `CommitStillRunningError` while the store is still running that commit (its answer was lost, its
   * statement goes on): the answer would not be final.
   */
  landed(entries: readonly CommitEntry[]): Promise<ReadonlySet<number>>;
  readJournal(kind: string, key: string, options: JournalQuery): Promise<readonly JournalEntry[]>;
  /**
   * Replaces the durable timers and the end stored with an actor's snapshot by those its state holds, when they differ
   * although no write changed them (rows stored by an older build, upgraded on load, or a kind whose machine changed):
   * the poller would otherwise activate the actor for a deadline it does not have after every passivation, or never
   * for one it has, and retirement would never find an end the row does not record. Applies only while the snapshot
   * is still at `snapshotVersion` and its epoch is not newer than `epoch`; false when it did not apply.
   */
  replaceTimers(
    kind: string,
    key: string,
    epoch: number,
    snapshotVersion: number,
    timers: Readonly<Record<string, number>>,
    endedAt: number | null,
  ): Promise<boolean>;
  /** Actors with a durable timer due at or before `before`, earliest first (then by kind and key), after `after`. */
  dueActors(before: number, limit: number, after?: DueActor): Promise<readonly DueActor[]>;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
}

export interface StoredActor {
  readonly kind: string;
  readonly key: string;
  /** Version of `snapshot`; the journal may hold later versions (`tail`). */
  readonly snapshotVersion: number;
  /** Newest journaled version: the actor's committed version. */
  readonly version: number;
  readonly epoch: number;
  readonly snapshot: unknown;
  readonly timers: Readonly<Record<string, number>>;
  /** The end the row records (ms), null when none. */
  readonly endedAt: number | null;
  /** The kind's state version `snapshot` was written at (ActorKind.stateVersion). */
  readonly stateVersion: number;
  /** Journal records after the snapshot, oldest first, to replay. */
  readonly tail: readonly StoredJournalRecord[];
  readonly updatedAt: Date;
}

export interface StoredJournalRecord extends JournalRecord {
  /** The kind's state version its segment was written at. */
  readonly stateVersion: number;
}

export interface JournalRecord {
  readonly version: number;
  readonly event: unknown;
  /** Host clock time (ms) at which the event was accepted. */
  readonly at: number;
}

export interface SnapshotWrite {
  readonly version: number;
  readonly snapshot: unknown;
  readonly timers: Readonly<Record<string, number>>;
  /** When the actor ended (ms, the kind's `endedAt`); absent while it lives or when its kind has no end. */
  readonly endedAt?: number;
}

export interface CommitEntry {
  readonly kind: string;
  readonly key: string;
  /** The journal must end at this version for the entry to apply; 0 when the actor has never been written. */
  readonly baseVersion: number;
  readonly epoch: number;
  /** The kind's state version the journal segment and the snapshot are written at; 1 when absent. */
  readonly stateVersion?: number;
  /** One record for each version after `baseVersion`, in order; at least one. */
  readonly journal: readonly JournalRecord[];
  /**
   * Present when this write also replaces the stored snapshot (always for an actor's first write); it is the state at
   * the entry's last version.
   */
  readonly snapshot?: SnapshotWrite;
}

export interface CommitOutcome {
  /** Positions in `entries` of the entries refused by the fence. */
  readonly fenced: ReadonlySet<number>;
}

export interface JournalQuery {
  readonly limit: number;
  /** Only entries with a version below this one (paging backwards from the newest). */
  readonly beforeVersion?: number;
}

export interface JournalEntry {
  readonly version: number;
  readonly epoch: number;
  readonly event: unknown;
  readonly at: Date;
  /** The kind's state version its segment was written at (1 for segments from before versions). */
  readonly stateVersion: number;
}

export interface DueActor {
  readonly kind: string;
  readonly key: string;
  readonly nextDueAt: number;
}

/**
 * What the store holds for an actor cannot be its state (a gap in the journal after the snapshot): no retry mends it,
 * an operator must look. Not a storage outage.
 */
export class StoredActorInconsistentError extends Error {
  /** What is stored, read as is, when the store read it: for an operator to inspect. */
  readonly stored: StoredActorRow | undefined;
  constructor(message: string, stored?: StoredActorRow) {
    super(message);
    this.stored = stored;
  }
}

/** An actor's snapshot row and the end of its journal, as stored (nothing replayed). */
export interface StoredActorRow {
  readonly snapshotVersion: number;
  /** Newest journaled version. */
  readonly version: number;
  readonly epoch: number;
  readonly snapshot: unknown;
  readonly timers: Readonly<Record<string, number>>;
  /** The kind's state version the snapshot was written at. */
  readonly stateVersion: number;
  readonly updatedAt: Date;
}

export const actorId = (kind: string, key: string): string => `${kind}\u0000${key}`;

/**
 * A commit refused before its statement reached the store (no connection could be had: the store is down or
 * unreachable). Nothing of it can have landed, so the host need not ask `landed`, and waiting for the store to answer
 * that question would only delay the refusal. `cause` is the store's own error, the one the senders are told.
 */
export class CommitNotSentError extends Error {
  constructor(override readonly cause: unknown) {
    super('the commit never reached the store', { cause });
  }
}

/** `landed` cannot answer yet: the commit asked about still runs in the store, and may yet land. */
export class CommitStillRunningError extends Error {
  constructor(readonly backend: number) {
    super(`the commit is still running (backend ${backend})`);
  }
}
