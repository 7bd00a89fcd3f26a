import { sql, type Kysely } from 'kysely';

/**
 * The journal stays append-only with one sanctioned exception: retention (storage/postgres/journal-retention.ts) may
 * delete a segment that the actor's stored snapshot covers, which loading never replays, and that is not the actor's
 * newest (the commit fence reads the journal's end from it), inside a transaction that says so
 * (`registry.journal_retention`). Every other UPDATE or DELETE is refused as before, and so is a retention delete of
 * any other segment: the guard checks both conditions itself, row by row, rather than trusting the statement that
 * asks. (Rows the same statement deleted before are no longer visible to the check, so it always sees the newest.)
 */
export const RETENTION_MAY_DELETE = `
      IF TG_OP = 'DELETE' AND current_setting('registry.journal_retention', true) = 'on'
         AND OLD.last_version <= (SELECT s.version FROM actor_snapshots s WHERE s.kind = OLD.kind AND s.key = OLD.key)
         AND OLD.version < (SELECT max(j.version) FROM actor_journal j WHERE j.kind = OLD.kind AND j.key = OLD.key) THEN
        RETURN OLD;
      END IF;`;

/** The journal's guard: each of `allowed` may let a DELETE through (`RETURN OLD`); everything else is refused. */
export async function guardJournal(db: Kysely<unknown>, allowed: readonly string[]): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION actor_journal_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN${sql.raw(allowed.join(''))}
      RAISE EXCEPTION 'actor_journal is append-only' USING ERRCODE = 'restrict_violation';
    END $$`.execute(db);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await guardJournal(db, [RETENTION_MAY_DELETE]);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await guardJournal(db, []);
}
