import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from '../storage/database.js';
import { StatementBatcher } from '../storage/statement-batcher.js';

/** One row per expiry second of the batch: `$1` is `[[expiresAtMs, [id, …]], …]`. */
const RECORD = `
INSERT INTO device_assertion_use_batches (expires_at, ids)
SELECT to_timestamp((g->>0)::float8 / 1000.0), ARRAY(SELECT json_array_elements_text(g->1))
  FROM json_array_elements($1::json) AS g`;

/** An id still inside its time window, as a starting server reloads it. */
export interface AssertionUse {
  readonly id: string;
  readonly expiresAt: number;
}

/**
 * The durable side of the device assertions' replay check: each accepted `deviceId:jti` is written before the request
 * it authenticates acts, so a server that restarts reloads it and still refuses the assertion. The process's memory
 * decides every check (see ReplayGuard); this store is only written, and read once at start. Writes are grouped, and a
 * group is one row per expiry second (an array of ids, kept until that second ends): a device-authenticated request
 * then costs Postgres a share of a row or two instead of a row and a primary-key entry of its own, and a reloaded id
 * expires at most a second after its own expiry. (One row per group, kept until the group's latest expiry, held every
 * id of a reloaded group up to a minute too long, and with it a device's share of the replay guard.)
 */
export class AssertionUses {
  readonly #db: Kysely<Database>;
  readonly #record: StatementBatcher<AssertionUse, undefined>;

  constructor(connection: { readonly pool: pg.Pool; readonly db: Kysely<Database> }) {
    this.#db = connection.db;
    this.#record = new StatementBatcher<AssertionUse, undefined>(async (uses) => {
      const bySecond = new Map<number, string[]>();
      for (const use of uses) {
        const second = Math.ceil(use.expiresAt / 1000) * 1000;
        const ids = bySecond.get(second);
        if (ids) ids.push(use.id);
        else bySecond.set(second, [use.id]);
      }
      await connection.pool.query(RECORD, [JSON.stringify([...bySecond])]);
      return uses.map(() => undefined);
    });
  }

  /** Resolves once `id` is stored, until `expiresAt`. */
  record(id: string, expiresAt: number): Promise<void> {
    return this.#record.submit({ id, expiresAt });
  }

  /** The ids whose window is still open at `now`, each with its expiry rounded up to the second. */
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
