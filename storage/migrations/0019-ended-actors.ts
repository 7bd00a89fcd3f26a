import { sql, type Kysely } from 'kysely';
import { guardJournal, RETENTION_MAY_DELETE } from './0017-journal-retention.js';

/** Retirement may delete any segment of an actor whose snapshot row records an end. */
const RETIREMENT_MAY_DELETE = `
      IF TG_OP = 'DELETE' AND current_setting('registry.actor_retirement', true) = 'on'
         AND (SELECT s.ended_at FROM actor_snapshots s WHERE s.kind = OLD.kind AND s.key = OLD.key) IS NOT NULL THEN
        RETURN OLD;
      END IF;`;

/**
 * Ended actors (a released or revoked Runtime session) are removed a retention period after their end
 * (storage/postgres/actor-retirement.ts), found by `ended_at`, which the commit that ends an actor stores with its
 * snapshot. The partial index holds only ended actors; on a large table an operator may add the column (instant: it
 * is nullable, with no default) and build the index first without blocking writes (`ALTER TABLE actor_snapshots ADD
 * COLUMN ended_at timestamptz`, then `CREATE INDEX CONCURRENTLY actor_snapshots_ended ON actor_snapshots (ended_at)
 * WHERE ended_at IS NOT NULL`); the migration then finds both.
 *
 * Runtime sessions that ended before this migration are given `ended_at`: from their stored snapshot where it shows
 * the end (the context's `endedAt`), otherwise from the first ending event in the journal after it. Before this
 * migration the write that ended a session stored no snapshot unless one was due anyway, and the journal holds only
 * events that changed the session, so a journaled release, revocation or timer (the idle deadline, its only timer)
 * after the snapshot is its end. Media rooms get none: emptiness counts from their next change.
 *
 * The journal's guard (0017) gains a second sanctioned delete: inside a transaction that says so
 * (`registry.actor_retirement`), any segment of an actor whose snapshot row records an end. Retirement deletes the
 * journal first and the snapshot row after, so the guard always finds the row it checks.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE actor_snapshots ADD COLUMN IF NOT EXISTS ended_at timestamptz`.execute(db);
  await sql`CREATE INDEX IF NOT EXISTS actor_snapshots_ended ON actor_snapshots (ended_at) WHERE ended_at IS NOT NULL`.execute(db);
  await sql`
    UPDATE actor_snapshots SET ended_at = to_timestamp((snapshot->'context'->>'endedAt')::float8 / 1000)
     WHERE kind = 'runtime-session' AND jsonb_typeof(snapshot->'context'->'endedAt') = 'number'`.execute(db);
  await sql`
    UPDATE actor_snapshots s SET ended_at = e.ended_at
      FROM (SELECT j.kind, j.key, to_timestamp(min((x.pair->>0)::float8) / 1000) AS ended_at
              FROM actor_snapshots t
              JOIN actor_journal j ON j.kind = t.kind AND j.key = t.key AND j.version > t.version
              CROSS JOIN LATERAL json_array_elements(j.events) AS x(pair)
             WHERE t.kind = 'runtime-session' AND t.ended_at IS NULL
               AND x.pair->1->>'type' IN ('session.release', 'session.revoke', 'timer.due')
             GROUP BY j.kind, j.key) e
     WHERE s.kind = e.kind AND s.key = e.key`.execute(db);
  await guardJournal(db, [RETENTION_MAY_DELETE, RETIREMENT_MAY_DELETE]);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await guardJournal(db, [RETENTION_MAY_DELETE]);
  await sql`DROP INDEX IF EXISTS actor_snapshots_ended`.execute(db);
  await sql`ALTER TABLE actor_snapshots DROP COLUMN ended_at`.execute(db);
}
