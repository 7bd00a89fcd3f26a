import { sql, type Kysely } from 'kysely';

/**
 * Ended actors by kind, for the kinds whose ended actors go sooner than the others (ActorKind.retention.endedMs: Media
 * rooms): their retirement pass reads this kind's ended actors oldest first, never the (far more numerous) ended
 * actors of other kinds that the shared index of 0019 holds before them. On a large table an operator may build it
 * first without blocking writes (`CREATE INDEX CONCURRENTLY actor_snapshots_ended_by_kind ON actor_snapshots (kind,
 * ended_at) WHERE ended_at IS NOT NULL`); the migration then finds it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS actor_snapshots_ended_by_kind ON actor_snapshots (kind, ended_at) WHERE ended_at IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS actor_snapshots_ended_by_kind`.execute(db);
}
