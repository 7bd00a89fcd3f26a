import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import type { Database } from './database.js';

const INT8_OID = 20;

/**
 * Versions and epochs are int8 in Postgres and plain numbers here: they count events and activations, far below
 * 2^53. The parser refuses, rather than rounds, anything beyond that.
 */
function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`int8 value ${text} exceeds the safe integer range`);
  return value;
}

const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID && format !== 'binary') return parseInt8;
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

export interface StorageConnection {
  readonly pool: pg.Pool;
  readonly db: Kysely<Database>;
  close(): Promise<void>;
}

export interface ConnectOptions {
  readonly connectionString: string;
  readonly maxConnections?: number;
  readonly applicationName?: string;
  /** Queries that take longer fail instead of holding a connection (and a caller) indefinitely. */
  readonly statementTimeoutMs?: number;
  readonly onError?: (error: Error) => void;
}

/** How long closing waits for the pool's connections to end before it gives up on them. */
const CLOSE_WAIT_MS = 2_000;

function settledWithin(work: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    void work.finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export function connectStorage(options: ConnectOptions): StorageConnection {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    application_name: options.applicationName ?? 'registry-coordination',
    statement_timeout: options.statementTimeoutMs ?? 30_000,
    connectionTimeoutMillis: 5_000,
    types,
  });
  // A client losing its connection must not crash the process; the query it was running, or the next one, reports
  // the outage. pg-pool listens only to idle clients and drops that listener while a client is checked out, so
  // every client gets a listener of its own for its whole life.
  pool.on('error', (error) => options.onError?.(error));
  /** Each client until its connection has ended. */
  const open = new Map<pg.PoolClient, Promise<void>>();
  pool.on('connect', (client) => {
    client.on('error', (error) => options.onError?.(error));
    open.set(client, new Promise<void>((resolve) => client.once('end', () => {
      open.delete(client);
      resolve();
    })));
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  let closed: Promise<void> | undefined;
  return {
    pool,
    db,
    // pg-pool's end() resolves once it has asked its idle clients to end, not once they have: wait for their
    // connections to close, so a Postgres stopped right after (the embedded one) does not cut them mid-goodbye and
    // every shutdown log a connection error.
    close: () => (closed ??= db.destroy().then(() => settledWithin(Promise.all(open.values()), CLOSE_WAIT_MS))),
  };
}
