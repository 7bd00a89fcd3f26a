import { sql, type Kysely, type RawBuilder } from 'kysely';

/**
 * The stored timer that makes the poller load a row an upgrade step repairs. No state holds it, so the activation
 * finds the row's timers not its state's and replaces them (ActorStore.replaceTimers), taking it off again.
 */
export const WAKE_TIMER = 'state_upgrade';

/**
 * Active Runtime sessions stored before `leaseCheckAt` existed hold no timer, so nothing loads them for the version 2
 * step of their kind (actors/runtime.actors.ts) to give them that deadline: their lease would never be looked at
 * until another event. Each gets the wake timer, due now; the poller loads it, the step adds the deadline (long past,
 * so the look happens at once) and the activation stores the timers its state holds. Sessions without an idle period
 * (stored before idle expiry) are left: taking the lease gives them no look either.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await wake(
    db,
    sql`kind = 'runtime-session' AND snapshot->>'value' = 'active' AND snapshot->'context'->'leaseCheckAt' IS NULL
        AND jsonb_typeof(snapshot->'context'->'idleTtlMs') = 'number'`,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await unwake(db, sql`kind = 'runtime-session'`);
}

/** Gives the rows `which` selects, of those stored at state version 1 and not ended, the wake timer. */
export async function wake(db: Kysely<unknown>, which: RawBuilder<unknown>): Promise<void> {
  await sql`
    UPDATE actor_snapshots
       SET timers = timers || jsonb_build_object(${WAKE_TIMER}::text, round(extract(epoch FROM now()) * 1000)::int8),
           next_due_at = LEAST(next_due_at, now())
     WHERE state_version = 1 AND ended_at IS NULL AND (${which})`.execute(db);
}

/** Takes the wake timer off the rows `which` selects that still hold it, due at the earliest of what remains. */
export async function unwake(db: Kysely<unknown>, which: RawBuilder<unknown>): Promise<void> {
  await sql`
    UPDATE actor_snapshots
       SET timers = timers - ${WAKE_TIMER}::text,
           next_due_at = (SELECT to_timestamp(min(t.value::float8) / 1000) FROM jsonb_each_text(timers - ${WAKE_TIMER}::text) t)
     WHERE timers ? ${WAKE_TIMER}::text AND (${which})`.execute(db);
}
