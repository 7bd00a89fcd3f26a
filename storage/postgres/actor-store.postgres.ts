import type pg from 'pg';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../database.js';
import {
  type ActorStore,
  type CommitEntry,
  CommitNotSentError,
  type CommitOutcome,
  CommitStillRunningError,
  type DueActor,
  type JournalEntry,
  type JournalQuery,
  type StoredActor,
  type StoredJournalRecord,
  StoredActorInconsistentError,
} from '../actor-store.js';

/**
 * One batch entry as sent to Postgres. Compact on purpose: on loopback the sender's write pays for the whole TCP
 * path, so bytes per event are CPU per event. `journal` is stored as it arrives: the row's `events`, `[atMs, event]`
 * pairs whose versions follow `base`.
 */
interface EntryInput {
  kind: string;
  key: string;
  base: number;
  epoch: number;
  journal: Array<[number, unknown]>;
  /** The kind's state version; absent for 1, the version of every kind that never changed what it stores. */
  sv?: number;
  snap?: { version: number; state: unknown; timers: Readonly<Record<string, number>>; nextDueAt: string | null; endedAt?: string };
}

/**
 * One statement per batch, one `json` parameter: a batch of thousands of actors costs one round trip and one WAL
 * flush, and each entry's journal segment is one row. `json`, not `jsonb`: the segments are stored as the text they
 * arrive as, and only snapshots are parsed into `jsonb`.
 * The fence is inside the statement: an entry applies only if the stored epoch is not newer and the journal ends
 * exactly at its base version (two primary-key probes, no write). Two writers passing the check at the same instant collide on
 * the journal's primary key (the segment's first version), which fails that whole batch: its actors reload, nothing
 * is written twice. Only refused entries come back (by position, usually none): every row returned is parsed and
 * matched in Node.
 */
export const COMMIT_BATCH = `
WITH checked AS (
  -- Scalar subqueries, never EXISTS or a join: each entry probes the primary key, whatever the table's size. Postgres
  -- may run an EXISTS as a hashed subplan that reads the whole journal once per statement; it chose that as soon as
  -- the journal had statistics (ANALYZE, as autovacuum runs it), and a batch then took a second.
  SELECT i.*,
         COALESCE((SELECT s.epoch FROM actor_snapshots s WHERE s.kind = i.kind AND s.key = i.key), 0) <= i.epoch
           AND COALESCE((SELECT j.last_version FROM actor_journal j WHERE j.kind = i.kind AND j.key = i.key
                          ORDER BY j.version DESC LIMIT 1),
                        -- No journal (never written, or a snapshot written without one): the snapshot's version.
                        (SELECT s.version FROM actor_snapshots s WHERE s.kind = i.kind AND s.key = i.key), 0) = i.base AS ok
    FROM ROWS FROM (json_to_recordset($1::json) AS (kind text, key text, base int8, epoch int8, journal json, snap json, sv int4))
         WITH ORDINALITY AS i(kind, key, base, epoch, journal, snap, sv, n)
), snapshots AS (
  INSERT INTO actor_snapshots (kind, key, version, epoch, snapshot, timers, next_due_at, ended_at, state_version)
  SELECT kind, key, (snap->>'version')::int8, epoch, (snap->'state')::jsonb, (snap->'timers')::jsonb,
         (snap->>'nextDueAt')::timestamptz, (snap->>'endedAt')::timestamptz, COALESCE(sv, 1)
    FROM checked WHERE ok AND snap IS NOT NULL
  ON CONFLICT (kind, key) DO UPDATE
     SET version = excluded.version, epoch = excluded.epoch, snapshot = excluded.snapshot, timers = excluded.timers,
         next_due_at = excluded.next_due_at, ended_at = excluded.ended_at, state_version = excluded.state_version,
         updated_at = now()
   WHERE actor_snapshots.epoch <= excluded.epoch AND actor_snapshots.version < excluded.version
), journal AS (
  INSERT INTO actor_journal (kind, key, version, last_version, epoch, events, state_version)
  SELECT kind, key, base + 1, base + json_array_length(journal), epoch, journal, COALESCE(sv, 1) FROM checked WHERE ok
)
SELECT n - 1 AS position FROM checked WHERE NOT ok`;

/** Which entries of a batch whose answer was lost are stored: their segment, under their epoch, ending where theirs does. */
const LANDED_BATCH = `
SELECT i.n - 1 AS position
  FROM ROWS FROM (json_to_recordset($1::json) AS (kind text, key text, first int8, last int8, epoch int8))
       WITH ORDINALITY AS i(kind, key, first, last, epoch, n)
 WHERE (SELECT j.epoch = i.epoch AND j.last_version = i.last FROM actor_journal j
         WHERE j.kind = i.kind AND j.key = i.key AND j.version = i.first) IS TRUE`;

/** An actor's snapshot row with the journal segments after it (`[version, events]`, oldest first), as `load` reads them. */
interface LoadedRow {
  kind: string;
  key: string;
  version: number;
  epoch: number;
  snapshot: unknown;
  timers: Readonly<Record<string, number>>;
  ended_at: Date | null;
  state_version: number;
  updated_at: Date;
  /** `[version, stateVersion, events]` of each segment. */
  segments: Array<[number, number, Array<[number, unknown]>]> | null;
}

/** `load` as one statement: the snapshot row with the journal segments after it. */
const LOAD_ACTOR = `
SELECT s.kind, s.key, s.version, s.epoch, s.snapshot, s.timers, s.ended_at, s.state_version, s.updated_at,
       (SELECT json_agg(json_build_array(j.version, j.state_version, j.events) ORDER BY j.version)
          FROM actor_journal j WHERE j.kind = s.kind AND j.key = s.key AND j.version > s.version) AS segments
  FROM actor_snapshots s WHERE s.kind = $1 AND s.key = $2`;

export class PostgresActorStore implements ActorStore {
  readonly #db: Kysely<Database>;
  readonly #pool: pg.Pool;
  readonly #commits: pg.Pool;
  readonly #loads: pg.Pool;
  /** The backend of each failed commit, by the batch's entries (what `landed` is asked about). */
  readonly #answerLost = new WeakMap<readonly CommitEntry[], number>();

  /**
   * `commitPool`: connections of the group commits alone (one per commit lane is enough: a lane has one batch in
   * flight). Every reply of every actor waits for a commit, and requests hold connections of the shared pool while
   * they wait for replies: commits taking from that pool could wait for connections held by their own waiters.
   */
  /**
   * `loadPool`: connections of actor loads, for the same reason: a request holding a connection of the shared pool
   * may wait for an actor that must first be loaded (a settings write checks its fence with the lease actor), and
   * requests holding every connection so would wait on each other's loads.
   */
  constructor(connection: { db: Kysely<Database>; pool: pg.Pool; commitPool?: pg.Pool; loadPool?: pg.Pool }) {
    this.#db = connection.db;
    this.#pool = connection.pool;
    this.#commits = connection.commitPool ?? connection.pool;
    this.#loads = connection.loadPool ?? connection.pool;
  }

  async load(kind: string, key: string): Promise<StoredActor | undefined> {
    // One statement, so the snapshot and the segments after it are read as of one moment: read apart, a commit storing
    // a newer snapshot in between, and journal retention then removing the segments it covers, would leave the
    // snapshot read first with a hole after it.
    const { rows } = await this.#loads.query<LoadedRow>({ name: 'actor_load', text: LOAD_ACTOR, values: [kind, key] });
    const row = rows[0];
    if (!row) return undefined;
    // A snapshot is always stored at the end of a segment (`commit` refuses otherwise), so the segments after it are
    // exactly those starting later, and they follow each other without a gap.
    const tail: StoredJournalRecord[] = [];
    for (const [version, stateVersion, events] of row.segments ?? []) {
      if (version !== row.version + tail.length + 1) {
        const [lastVersion, , lastEvents] = row.segments!.at(-1)!;
        const stored = {
          snapshotVersion: row.version,
          version: lastVersion + lastEvents.length - 1,
          epoch: row.epoch,
          snapshot: row.snapshot,
          timers: row.timers,
          stateVersion: row.state_version,
          updatedAt: row.updated_at,
        };
        throw new StoredActorInconsistentError(`journal of ${kind}/${key} has a gap before version ${version} (snapshot at ${row.version})`, stored);
      }
      events.forEach(([at, event], i) => tail.push({ version: version + i, event, at, stateVersion }));
    }
    return {
      kind: row.kind,
      key: row.key,
      snapshotVersion: row.version,
      version: tail.at(-1)?.version ?? row.version,
      epoch: row.epoch,
      snapshot: row.snapshot,
      timers: row.timers,
      endedAt: row.ended_at === null ? null : row.ended_at.getTime(),
      stateVersion: row.state_version,
      tail,
      updatedAt: row.updated_at,
    };
  }

  async commit(entries: readonly CommitEntry[]): Promise<CommitOutcome> {
    if (entries.length === 0) return { fenced: new Set() };
    const input: EntryInput[] = [];
    for (const entry of entries) {
      if (entry.journal.length === 0) throw new Error(`commit of ${entry.kind}/${entry.key} carries no event`);
      const journal: Array<[number, unknown]> = [];
      for (let i = 0; i < entry.journal.length; i++) {
        const record = entry.journal[i]!;
        // Versions are derived from `base` in the statement; a gap here would write the wrong ones.
        if (record.version !== entry.baseVersion + i + 1) {
          throw new Error(`journal of ${entry.kind}/${entry.key} is not contiguous after version ${entry.baseVersion}`);
        }
        journal.push([record.at, record.event]);
      }
      const out: EntryInput = { kind: entry.kind, key: entry.key, base: entry.baseVersion, epoch: entry.epoch, journal };
      if (entry.stateVersion !== undefined && entry.stateVersion !== 1) out.sv = entry.stateVersion;
      if (entry.snapshot) {
        // Loading replays the segments after the snapshot's version; one ending elsewhere would be replayed in part.
        if (entry.snapshot.version !== entry.baseVersion + journal.length) {
          throw new Error(`snapshot of ${entry.kind}/${entry.key} is not at the end of its journal segment`);
        }
        out.snap = {
          version: entry.snapshot.version,
          state: entry.snapshot.snapshot,
          timers: entry.snapshot.timers,
          nextDueAt: earliest(entry.snapshot.timers),
          ...(entry.snapshot.endedAt === undefined ? {} : { endedAt: new Date(entry.snapshot.endedAt).toISOString() }),
        };
      }
      input.push(out);
    }
    // Named: parsed and planned once per connection. The plan does not depend on the batch's shape (set-returning
    // functions are estimated alike whatever their argument), so a cached plan is the one a fresh one would be.
    // A connection first, apart from the statement: a commit that could not get one never left, and its lane can say
    // so at once instead of asking an unreachable store what landed (CommitNotSentError).
    let client: pg.PoolClient;
    try {
      client = await this.#commits.connect();
    } catch (error) {
      throw new CommitNotSentError(error);
    }
    let result: pg.QueryResult<{ position: string }>;
    try {
      result = await client.query<{ position: string }>({ name: 'actor_commit_batch', text: COMMIT_BATCH, values: [JSON.stringify(input)] });
    } catch (error) {
      // The backend may still be running the statement after its answer was lost (a cut connection, the client's query
      // timeout): `landed` must not answer before it has ended.
      const pid = (client as { processID?: number }).processID;
      if (pid !== undefined) this.#answerLost.set(entries, pid);
      // As pg-pool's own `query` does: a connection whose statement failed is not reused (it may be broken).
      client.release(error instanceof Error ? error : true);
      throw error;
    }
    client.release();
    return { fenced: new Set(result.rows.map((r) => Number(r.position))) };
  }

  async landed(entries: readonly CommitEntry[]): Promise<ReadonlySet<number>> {
    if (entries.length === 0) return new Set();
    const pid = this.#answerLost.get(entries);
    if (pid !== undefined) {
      // Read while the commit still runs, its entries would look absent and then land: its senders, told to retry,
      // would apply them twice. A pid reused since by another statement only makes the lane wait out its bound.
      const running = await this.#commits.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", [pid]);
      if (running.rows.length > 0) throw new CommitStillRunningError(pid);
      this.#answerLost.delete(entries);
    }
    const input = entries.map((e) => ({ kind: e.kind, key: e.key, first: e.baseVersion + 1, last: e.baseVersion + e.journal.length, epoch: e.epoch }));
    // On the commits' own pool, like the commit it asks about. A scalar subquery per entry: a primary-key probe each.
    const result = await this.#commits.query<{ position: string }>({
      text: LANDED_BATCH,
      values: [JSON.stringify(input)],
    });
    return new Set(result.rows.map((r) => Number(r.position)));
  }

  async readJournal(kind: string, key: string, options: JournalQuery): Promise<readonly JournalEntry[]> {
    const before = options.beforeVersion ?? Number.MAX_SAFE_INTEGER;
    // Newest segment first, one primary-key probe each, counting events (the first one only those below the bound);
    // the walk stops at the segment that completes the page. A segment may hold hundreds of events (a runtime socket's
    // burst is one commit), so a page reads about the events it returns, not `limit` segments.
    const { rows: segments } = await sql<{ version: number; epoch: number; state_version: number; events: Array<[number, unknown]> }>`
      WITH RECURSIVE page (version, events) AS (
        SELECT s.version, s.events FROM (
          SELECT j.version, LEAST(j.last_version, ${before}::int8 - 1) - j.version + 1 AS events
            FROM actor_journal j WHERE j.kind = ${kind} AND j.key = ${key} AND j.version < ${before}::int8
           ORDER BY j.version DESC LIMIT 1) s
        UNION ALL
        SELECT older.version, page.events + older.last_version - older.version + 1
          FROM page CROSS JOIN LATERAL (
            SELECT j.version, j.last_version FROM actor_journal j
             WHERE j.kind = ${kind} AND j.key = ${key} AND j.version < page.version
             ORDER BY j.version DESC LIMIT 1) older
         WHERE page.events < ${options.limit}
      )
      SELECT j.version, j.epoch, j.state_version, j.events FROM page
        JOIN actor_journal j ON j.kind = ${kind} AND j.key = ${key} AND j.version = page.version
       ORDER BY j.version DESC`.execute(this.#db);
    const entries: JournalEntry[] = [];
    for (const segment of segments) {
      for (let i = segment.events.length - 1; i >= 0 && entries.length < options.limit; i--) {
        const version = segment.version + i;
        if (version >= before) continue;
        const [at, event] = segment.events[i]!;
        entries.push({ version, epoch: segment.epoch, event, at: new Date(at), stateVersion: segment.state_version });
      }
    }
    return entries;
  }

  async replaceTimers(
    kind: string,
    key: string,
    epoch: number,
    snapshotVersion: number,
    timers: Readonly<Record<string, number>>,
    endedAt: number | null,
  ): Promise<boolean> {
    const result = await this.#db
      .updateTable('actor_snapshots')
      .set({ timers: JSON.stringify(timers), next_due_at: earliest(timers), ended_at: endedAt === null ? null : new Date(endedAt) })
      .where('kind', '=', kind)
      .where('key', '=', key)
      .where('version', '=', snapshotVersion)
      .where('epoch', '<=', epoch)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async dueActors(before: number, limit: number, after?: DueActor): Promise<readonly DueActor[]> {
    let query = this.#db
      .selectFrom('actor_snapshots')
      .select(['kind', 'key', 'next_due_at'])
      .where('next_due_at', '<=', new Date(before));
    if (after) {
      query = query.where(sql<boolean>`(next_due_at, kind, key) > (${new Date(after.nextDueAt)}, ${after.kind}, ${after.key})`);
    }
    const rows = await query.orderBy('next_due_at').orderBy('kind').orderBy('key').limit(limit).execute();
    return rows.map((r) => ({ kind: r.kind, key: r.key, nextDueAt: (r.next_due_at ?? new Date(before)).getTime() }));
  }

  /**
   * Every way to the store answers: the shared pool, the commits' own and the loads' own (a node whose commits or loads
   * all fail is not ready). A pool whose every connection is at work is taken as answering rather than queued behind
   * that work (a burst of activations would otherwise read as an outage): its statements' own timeout fails them,
   * and the pool with them, if the store stopped answering.
   */
  async ping(): Promise<void> {
    await Promise.all([...new Set([this.#pool, this.#commits, this.#loads])].map(pingUnlessBusy));
  }
}

async function pingUnlessBusy(pool: pg.Pool): Promise<void> {
  if (pool.totalCount > 0 && pool.idleCount === 0) return;
  await pool.query('SELECT 1');
}

function earliest(timers: Readonly<Record<string, number>>): string | null {
  let min = Infinity;
  for (const due of Object.values(timers)) if (due < min) min = due;
  return min === Infinity ? null : new Date(min).toISOString();
}
