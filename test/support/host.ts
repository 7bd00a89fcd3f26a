import { ActorHost, type ActorHostOptions, type HostLogger } from '../../actors/actor-host.js';
import type { ActorReply } from '../../actors/activation.js';
import type { ActorKind } from '../../actors/actor-kind.js';
import type { Clock } from '../../actors/clock.js';
import { InProcessOwnership, type Ownership } from '../../actors/ownership.js';
import type { Test } from 'uvu';
import type { EventObject } from 'xstate';
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
    replaceTimers: (kind, key, epoch, snapshotVersion, timers, endedAt) => inner.replaceTimers(kind, key, epoch, snapshotVersion, timers, endedAt),
    ping: () => inner.ping(),
    landed: (entries) => inner.landed(entries),
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

/** An event as a test sees it passing through `interceptSends`. */
export type SentEvent = EventObject & { readonly sessionId?: string };

/**
 * Routes every `host.send` through `send` (which calls `next` to deliver it, at once or later), until the returned
 * function restores the host: for tests that hold one step of a flow to order it against another.
 */
export function interceptSends(
  host: ActorHost,
  send: (kind: string, key: string, event: SentEvent, next: () => Promise<ActorReply>) => Promise<ActorReply>,
): () => void {
  const original = host.send;
  host.send = function <E extends EventObject>(this: ActorHost, kind: string, key: string, event: E): Promise<ActorReply> {
    return send(kind, key, event, () => original.call(this, kind, key, event));
  };
  return () => {
    host.send = original;
  };
}
