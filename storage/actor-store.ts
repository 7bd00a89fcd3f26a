/**
 * Where actor snapshots and their journal live. The host talks only to this interface; `storage/postgres` fills it.
 */
export interface ActorStore {
  load(kind: string, key: string): Promise<StoredActor | undefined>;
  /**
   * Writes many actors' progress as one atomic statement. Each entry is applied only if the stored row is still at
   * `baseVersion` and its epoch is not newer than the entry's: entries that fail that fence are left out (with their
   * journal rows) and named in `fenced`; the rest commit together or, on error, not at all (the promise rejects).
   */
  commit(entries: readonly CommitEntry[]): Promise<CommitOutcome>;
  readJournal(kind: string, key: string, options: JournalQuery): Promise<readonly JournalEntry[]>;
  /** Actors with a durable timer due at or before `before`, earliest first. */
  dueActors(before: number, limit: number): Promise<readonly DueActor[]>;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
}

export interface StoredActor {
  readonly kind: string;
  readonly key: string;
  readonly version: number;
  readonly epoch: number;
  readonly snapshot: unknown;
  readonly timers: Readonly<Record<string, number>>;
  readonly updatedAt: Date;
}

export interface JournalRecord {
  readonly version: number;
  readonly event: unknown;
  /** Host clock time (ms) at which the event was accepted. */
  readonly at: number;
}

export interface CommitEntry {
  readonly kind: string;
  readonly key: string;
  /** Version the stored row must have for this entry to apply; 0 when the actor has never been written. */
  readonly baseVersion: number;
  readonly version: number;
  readonly epoch: number;
  readonly snapshot: unknown;
  readonly timers: Readonly<Record<string, number>>;
  /** One record for each version in (baseVersion, version], in order. */
  readonly journal: readonly JournalRecord[];
}

export interface CommitOutcome {
  /** `kind\u0000key` of each entry refused by the fence. */
  readonly fenced: ReadonlySet<string>;
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
}

export interface DueActor {
  readonly kind: string;
  readonly key: string;
  readonly nextDueAt: number;
}

export const actorId = (kind: string, key: string): string => `${kind}\u0000${key}`;
