import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from '../storage/database.js';
import { StatementBatcher } from '../storage/statement-batcher.js';

const RECORD = `
  INSERT INTO device_assertion_uses (id, expires_at)
  SELECT id, to_timestamp(expires_ms / 1000.0) FROM unnest($1::text[], $2::float8[]) AS u(id, expires_ms)
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

/**
 * The durable side of the device assertions' replay check: each accepted `deviceId:jti` is written once, before the
 * request it authenticates acts, so an assertion used before a restart is still refused after it. Writes are grouped
 * (one statement per batch, straight through pg: this runs once per device-authenticated request); the id is the
 * primary key, so of two uses of one id only one insert wins, whichever process or life of a process makes them.
 */
export class AssertionUses {
  readonly #db: Kysely<Database>;
  readonly #record: StatementBatcher<{ id: string; expiresAt: number }, boolean>;

  constructor(connection: { readonly pool: pg.Pool; readonly db: Kysely<Database> }) {
    this.#db = connection.db;
    this.#record = new StatementBatcher(async (uses) => {
      const { rows } = await connection.pool.query<{ id: string }>(RECORD, [uses.map((u) => u.id), uses.map((u) => u.expiresAt)]);
      const inserted = new Set(rows.map((row) => row.id));
      return uses.map((use) => inserted.has(use.id));
    });
  }

  /** True when `id` was not recorded before (it is now, until `expiresAt`); false when it was: a replay. */
  firstUse(id: string, expiresAt: number): Promise<boolean> {
    return this.#record.submit({ id, expiresAt });
  }

  /** Removes the ids that could no longer pass the time check anyway; returns how many. */
  async sweep(now: number): Promise<number> {
    const result = await this.#db.deleteFrom('device_assertion_uses').where('expires_at', '<', new Date(now)).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
