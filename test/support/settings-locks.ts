import { sql } from 'kysely';
import type { TestDatabase } from './database.js';

/** plugins/settings/plugin-settings.ts ACCOUNT_LOCK: the (Plugin, account) lock every settings writer of a person takes. */
const ACCOUNT_LOCK = 0x5e77_0002;

/**
 * Runs `during` while the test (its own connection) holds the Media settings lock of `accountId`, as a concurrent writer
 * would; the lock goes when `during` calls `release` or ends, whichever is first, so a failed assertion never leaves
 * it held.
 */
export async function withSettingsLockHeld(db: TestDatabase, accountId: string, during: (release: () => Promise<void>) => Promise<void>): Promise<void> {
  let unlock!: () => void;
  const held = new Promise<void>((resolve) => (unlock = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.connection.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${ACCOUNT_LOCK}::int4, hashtext(${`plg_media ${accountId}`}))`.execute(trx);
    locked();
    await held;
  });
  await lockTaken;
  const release = async (): Promise<void> => {
    unlock();
    await holder;
  };
  try {
    await during(release);
  } finally {
    await release();
  }
}

/** Advisory locks someone is waiting for on the test cluster. */
export async function advisoryLockWaiters(db: TestDatabase): Promise<number> {
  const rows = await sql<{ n: string }>`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`.execute(db.connection.db);
  return Number(rows.rows[0]!.n);
}
