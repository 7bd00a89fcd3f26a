import { sql, type Kysely } from 'kysely';

/**
 * The journal keeps one row per actor per commit (a segment of consecutive versions) instead of one row per event.
 *
 * An actor that receives a burst (a runtime socket pipelining its messages, one busy actor) commits many events in one
 * batch entry; as rows, each of them paid a heap tuple, a primary-key entry and a WAL record, about half of what
 * Postgres spent per event. Every event is still in the journal with its own time and resulting version.
 *
 * The primary key is the segment's first version: two writers that both saw the journal end at the same version
 * collide on it, whatever the lengths of their segments, which is what makes a race fail instead of interleave.
 * Existing rows become one-event segments.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE actor_journal_segments (
      kind text NOT NULL,
      key text NOT NULL,
      version int8 NOT NULL,
      last_version int8 NOT NULL CHECK (last_version >= version),
      epoch int8 NOT NULL,
      events json NOT NULL,
      CONSTRAINT actor_journal_segments_pk PRIMARY KEY (kind, key, version)
    )`.execute(db);
  await sql`
    INSERT INTO actor_journal_segments (kind, key, version, last_version, epoch, events)
    SELECT kind, key, version, version, epoch,
           json_build_array(json_build_array(round(extract(epoch FROM at) * 1000), event))
      FROM actor_journal`.execute(db);
  await sql`DROP TABLE actor_journal`.execute(db);
  await sql`ALTER TABLE actor_journal_segments RENAME TO actor_journal`.execute(db);
  await sql`ALTER TABLE actor_journal RENAME CONSTRAINT actor_journal_segments_pk TO actor_journal_pk`.execute(db);
  await appendOnly(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE actor_journal RENAME TO actor_journal_segments`.execute(db);
  await sql`ALTER TABLE actor_journal_segments RENAME CONSTRAINT actor_journal_pk TO actor_journal_segments_pk`.execute(db);
  await sql`DROP TRIGGER actor_journal_no_update ON actor_journal_segments`.execute(db);
  await sql`
    CREATE TABLE actor_journal (
      kind text NOT NULL,
      key text NOT NULL,
      version int8 NOT NULL,
      epoch int8 NOT NULL,
      event json NOT NULL,
      at timestamptz NOT NULL,
      CONSTRAINT actor_journal_pk PRIMARY KEY (kind, key, version)
    )`.execute(db);
  await sql`
    INSERT INTO actor_journal (kind, key, version, epoch, event, at)
    SELECT s.kind, s.key, s.version + e.n - 1, s.epoch, e.pair->1, to_timestamp((e.pair->>0)::float8 / 1000)
      FROM actor_journal_segments s, json_array_elements(s.events) WITH ORDINALITY AS e(pair, n)`.execute(db);
  await sql`DROP TABLE actor_journal_segments`.execute(db);
  await appendOnly(db);
}

/** 0001's function, attached again: append-only stays a property of the table. */
async function appendOnly(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TRIGGER actor_journal_no_update BEFORE UPDATE OR DELETE ON actor_journal
    FOR EACH ROW EXECUTE FUNCTION actor_journal_append_only()`.execute(db);
}
