import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from '../storage/database.js';
import { StatementBatcher } from '../storage/statement-batcher.js';

const RECORD = 'INSERT INTO device_assertion_use_batches (expires_at, ids) VALUES (to_timestamp($1::float8 / 1000.0), $2::text[])';

/** An id still inside its time window, as a starting server reloads it. */
export interface AssertionUse {
  readonly id: string;
  readonly expiresAt: number;
}

/**
 * The durable side of the device assertions' replay check: each accepted `deviceId:jti` is written before the request
 * it authenticates acts, so a server that restarts reloads it and still refuses the assertion. The process's memory
 * decides every check (see ReplayGuard); this store is only written, and read once at start. Writes are grouped, and a
 * group is one row (an array of ids, kept until the latest of their expiries): a device-authenticated request then
 * costs Postgres a share of one row instead of a row and a primary-key entry of its own.
 */
export class AssertionUses {
  readonly #db: Kysely<Database>;
  readonly #record: StatementBatcher<AssertionUse, undefined>;

  constructor(connection: { readonly pool: pg.Pool; readonly db: Kysely<Database> }) {
    this.#db = connection.db;
    this.#record = new StatementBatcher<AssertionUse, undefined>(async (uses) => {
      let expiresAt = 0;
      for (const use of uses) expiresAt = Math.max(expiresAt, use.expiresAt);
      await connection.pool.query(RECORD, [expiresAt, uses.map((use) => use.id)]);
      return uses.map(() => undefined);
    });
  }

  /** Resolves once `id` is stored, until `expiresAt`. */
  record(id: string, expiresAt: number): Promise<void> {
    return this.#record.submit({ id, expiresAt });
  }

  /** The ids whose window is still open at `now`, each with the expiry of its group (never earlier than its own). */
  async unexpired(now: number): Promise<AssertionUse[]> {
    const rows = await this.#db
      .selectFrom('device_assertion_use_batches')
      .select(['expires_at', 'ids'])
      .where('expires_at', '>', new Date(now))
      .execute();
    const uses: AssertionUse[] = [];
    for (const row of rows) for (const id of row.ids) uses.push({ id, expiresAt: row.expires_at.getTime() });
    return uses;
  }

  /** Removes the groups whose every id could no longer pass the time check anyway; returns how many ids went. */
  async sweep(now: number): Promise<number> {
    const rows = await this.#db
      .deleteFrom('device_assertion_use_batches')
      .where('expires_at', '<=', new Date(now))
      .returning((eb) => eb.fn<number>('cardinality', ['ids']).as('count'))
      .execute();
    return rows.reduce((sum, row) => sum + Number(row.count), 0);
  }
}
