import { ActorHost, type ActorHostOptions, type HostLogger } from '../../actors/actor-host.js';
import type { ActorKind } from '../../actors/actor-kind.js';
import type { Clock } from '../../actors/clock.js';
import { InProcessOwnership, type Ownership } from '../../actors/ownership.js';
import type { Test } from 'uvu';
import type { ActorStore, CommitEntry, CommitOutcome } from '../../storage/actor-store.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { createTestDatabase, type TestDatabase } from './database.js';

export interface RecordedLog {
  readonly level: 'warn' | 'error' | 'info';
  readonly message: string;
  readonly details: Record<string, unknown>;
}

/** A logger that keeps what it is told, so tests can assert on warnings. */
export function recordingLogger(): HostLogger & { readonly entries: RecordedLog[] } {
  const entries: RecordedLog[] = [];
  return {
    entries,
    warn: (details, message) => entries.push({ level: 'warn', message, details }),
    error: (details, message) => entries.push({ level: 'error', message, details }),
    info: (details, message) => entries.push({ level: 'info', message, details }),
  };
}

export function hostFor(
  store: ActorStore,
  clock: Clock,
  kinds: readonly ActorKind[],
  extra: Partial<ActorHostOptions> & { ownership?: Ownership } = {},
): ActorHost {
  return new ActorHost({
    store,
    clock,
    kinds,
    ownership: extra.ownership ?? new InProcessOwnership(),
    logger: extra.logger ?? recordingLogger(),
    ...extra,
  });
}

/** The real store, whose commits go through `commit` (which calls `next` to reach the store, or fails instead). */
export function interceptCommits(
  inner: ActorStore,
  commit: (entries: readonly CommitEntry[], next: (entries: readonly CommitEntry[]) => Promise<CommitOutcome>) => Promise<CommitOutcome>,
): ActorStore {
  return {
    load: (kind, key) => inner.load(kind, key),
    readJournal: (kind, key, query) => inner.readJournal(kind, key, query),
    dueActors: (before, limit, after) => inner.dueActors(before, limit, after),
    replaceTimers: (kind, key, epoch, snapshotVersion, timers) => inner.replaceTimers(kind, key, epoch, snapshotVersion, timers),
    ping: () => inner.ping(),
    commit: (entries) => commit(entries, (e) => inner.commit(e)),
  };
}

/**
 * A fresh database and the actor store on it for a whole suite: made before its first test (`opened` hands them to the
 * suite's variables), dropped after its last.
 */
export function withActorStore(suite: Test, opened: (database: { db: TestDatabase; store: PostgresActorStore }) => void): void {
  let db: TestDatabase | undefined;
  suite.before(async () => {
    db = await createTestDatabase();
    opened({ db, store: new PostgresActorStore(db.connection) });
  });
  suite.after(async () => {
    await db?.drop();
  });
}
