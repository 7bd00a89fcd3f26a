import { sql, type Kysely } from 'kysely';
import { unwake, wake } from './0029-wake-sessions-without-lease-check.js';

/**
 * Accounts abandoned and handles freed before their ends were recorded, and Media rooms stored empty before
 * `emptySince` existed: no row records their end, so retirement never finds them, and nothing loads them for the
 * version 2 steps of their kinds (actors/identity.actors.ts, actors/media.actors.ts) to give them one. Each gets the
 * wake timer (0028): the poller loads it, the step records the end (from the row's stored time), and the activation
 * stores the end and timers its state holds, so retirement removes it in its turn. A room whose journal after the
 * snapshot fills it again is replayed on top of the step and stays.
 */
const WHICH = sql`
     (kind = 'account' AND snapshot->>'value' = 'abandoned' AND snapshot->'context'->'abandonedAt' IS NULL)
  OR (kind = 'account-handle' AND snapshot->>'value' = 'free' AND snapshot->'context'->'freedAt' IS NULL)
  OR (kind = 'media-room' AND snapshot->'context'->'members' = '[]'::jsonb AND snapshot->'context'->'emptySince' IS NULL)`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await wake(db, WHICH);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await unwake(db, sql`kind IN ('account', 'account-handle', 'media-room')`);
}
