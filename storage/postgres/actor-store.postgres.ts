import type pg from 'pg';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../database.js';
import {
  actorId,
  type ActorStore,
  type CommitEntry,
  type CommitOutcome,
  type DueActor,
  type JournalEntry,
  type JournalQuery,
  type StoredActor,
} from '../actor-store.js';

interface SnapshotInput {
  kind: string;
  key: string;
  base_version: number;
  version: number;
  epoch: number;
  snapshot: unknown;
  timers: Readonly<Record<string, number>>;
  next_due_at: string | null;
}

interface JournalInput {
  kind: string;
  key: string;
  version: number;
  epoch: number;
  event: unknown;
  at: string;
}

/**
 * One statement per batch: the snapshot rows travel as a single jsonb array and are unpacked server-side, so a batch
 * of thousands of actors costs one round trip and one WAL flush. The fence is inside the statement: only rows whose
 * stored version is the entry's base and whose epoch is not newer are updated, and only those actors' journal rows
 * are inserted.
 */
const COMMIT_BATCH = `
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(
    kind text, key text, base_version int8, version int8, epoch int8, snapshot jsonb, timers jsonb,
    next_due_at timestamptz)
), updated AS (
  UPDATE actor_snapshots s
     SET version = i.version, epoch = i.epoch, snapshot = i.snapshot, timers = i.timers,
         next_due_at = i.next_due_at, updated_at = now()
    FROM input i
   WHERE i.base_version > 0 AND s.kind = i.kind AND s.key = i.key
     AND s.version = i.base_version AND s.epoch <= i.epoch
  RETURNING s.kind, s.key
), inserted AS (
  INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers, next_due_at)
  SELECT kind, key, version, epoch, snapshot, timers, next_due_at FROM input WHERE base_version = 0
  ON CONFLICT (kind, key) DO NOTHING
  RETURNING kind, key
), won AS (
  SELECT kind, key FROM updated UNION ALL SELECT kind, key FROM inserted
), journal AS (
  INSERT INTO actor_journal (kind, key, version, epoch, event, at)
  SELECT e.kind, e.key, e.version, e.epoch, e.event, e.at
    FROM jsonb_to_recordset($2::jsonb) AS e(kind text, key text, version int8, epoch int8, event jsonb, at timestamptz)
    JOIN won USING (kind, key)
)
SELECT kind, key FROM won`;

export class PostgresActorStore implements ActorStore {
  readonly #db: Kysely<Database>;
  readonly #pool: pg.Pool;

  constructor(connection: { db: Kysely<Database>; pool: pg.Pool }) {
    this.#db = connection.db;
    this.#pool = connection.pool;
  }

  async load(kind: string, key: string): Promise<StoredActor | undefined> {
    const row = await this.#db
      .selectFrom('actor_snapshots')
      .select(['kind', 'key', 'version', 'epoch', 'snapshot', 'timers', 'updated_at'])
      .where('kind', '=', kind)
      .where('key', '=', key)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      kind: row.kind,
      key: row.key,
      version: row.version,
      epoch: row.epoch,
      snapshot: row.snapshot,
      timers: row.timers,
      updatedAt: row.updated_at,
    };
  }

  async commit(entries: readonly CommitEntry[]): Promise<CommitOutcome> {
    if (entries.length === 0) return { fenced: new Set() };
    const snapshots: SnapshotInput[] = [];
    const journal: JournalInput[] = [];
    for (const entry of entries) {
      snapshots.push({
        kind: entry.kind,
        key: entry.key,
        base_version: entry.baseVersion,
        version: entry.version,
        epoch: entry.epoch,
        snapshot: entry.snapshot,
        timers: entry.timers,
        next_due_at: earliest(entry.timers),
      });
      for (const record of entry.journal) {
        journal.push({
          kind: entry.kind,
          key: entry.key,
          version: record.version,
          epoch: entry.epoch,
          event: record.event,
          at: new Date(record.at).toISOString(),
        });
      }
    }
    // Straight through pg as a named statement: parsed and planned once per connection, not once per batch.
    const result = await this.#pool.query<{ kind: string; key: string }>({
      name: 'actor_commit_batch',
      text: COMMIT_BATCH,
      values: [JSON.stringify(snapshots), JSON.stringify(journal)],
    });
    const won = new Set(result.rows.map((r) => actorId(r.kind, r.key)));
    const fenced = new Set<string>();
    for (const entry of entries) {
      const id = actorId(entry.kind, entry.key);
      if (!won.has(id)) fenced.add(id);
    }
    return { fenced };
  }

  async readJournal(kind: string, key: string, options: JournalQuery): Promise<readonly JournalEntry[]> {
    let query = this.#db
      .selectFrom('actor_journal')
      .select(['version', 'epoch', 'event', 'at'])
      .where('kind', '=', kind)
      .where('key', '=', key);
    if (options.beforeVersion !== undefined) query = query.where('version', '<', options.beforeVersion);
    const rows = await query.orderBy('version', 'desc').limit(options.limit).execute();
    return rows.map((r) => ({ version: r.version, epoch: r.epoch, event: r.event, at: r.at }));
  }

  async dueActors(before: number, limit: number): Promise<readonly DueActor[]> {
    const rows = await this.#db
      .selectFrom('actor_snapshots')
      .select(['kind', 'key', 'next_due_at'])
      .where('next_due_at', '<=', new Date(before))
      .orderBy('next_due_at')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ kind: r.kind, key: r.key, nextDueAt: (r.next_due_at ?? new Date(before)).getTime() }));
  }

  async ping(): Promise<void> {
    await sql`SELECT 1`.execute(this.#db);
  }
}

function earliest(timers: Readonly<Record<string, number>>): string | null {
  let min = Infinity;
  for (const due of Object.values(timers)) if (due < min) min = due;
  return min === Infinity ? null : new Date(min).toISOString();
}
