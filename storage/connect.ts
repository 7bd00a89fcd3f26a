import pg from 'pg';
import { Kysely, PostgresDialect, type PostgresCursor, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from 'kysely';
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
  /**
   * Queries that take longer fail instead of holding a connection (and a caller) indefinitely: Postgres cancels them,
   * and the client gives up on a backend that does not answer at all (see QUERY_TIMEOUT_MARGIN_MS). 0 sets neither
   * limit (the database's own default statement_timeout still applies).
   */
  readonly statementTimeoutMs?: number;
  readonly onError?: (error: Error) => void;
}

/**
 * The client's own limit is the statement timeout plus this: a backend that is alive cancels the statement itself
 * first, which answers 57014 and keeps the connection; only a backend that answers nothing (a frozen host, a half-open
 * TCP connection after a failover) reaches the client's limit, and its connection is then discarded.
 */
const QUERY_TIMEOUT_MARGIN_MS = 2_000;

/**
 * How long opening a new connection may take (TCP, TLS, startup and authentication) before it is given up as an
 * outage. Only the connecting is bounded by this: see `connectStorage` for how long a caller may wait for a
 * connection of a full pool.
 */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * A pg client whose connecting gives up after CONNECT_TIMEOUT_MS. pg-pool's own `connectionTimeoutMillis` bounds both
 * the connecting and a caller's wait for a connection of a full pool, and these need different limits.
 */
class BoundedConnectClient extends pg.Client {
  constructor(config: pg.ClientConfig = {}) {
    super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }
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
  const statementTimeoutMs = options.statementTimeoutMs ?? 30_000;
  const queryTimeoutMs = statementTimeoutMs > 0 ? statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS : 0;
  const pool = new pg.Pool({
    Client: BoundedConnectClient,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    application_name: options.applicationName ?? 'registry-coordination',
    statement_timeout: statementTimeoutMs,
    ...(queryTimeoutMs > 0 ? { query_timeout: queryTimeoutMs } : {}),
    // A peer that vanished without closing the connection (host down, network cut) is noticed by the kernel's
    // probes, so an idle connection does not wait forever for an answer that cannot come.
    keepAlive: true,
    // A caller waits for a connection of a full pool at most as long as a query may run, not CONNECT_TIMEOUT_MS:
    // a burst of more queries than connections (a thousand actors activating at once, a loaded host) is queued work
    // that drains at the rate queries finish, not an outage. With 5 s here a burst on a busy machine failed its
    // later callers with "timeout exceeded when trying to connect" (storage unavailable) while Postgres was fine.
    // Connecting itself stays bounded by BoundedConnectClient (pg-pool's timer, this long, fires after it).
    connectionTimeoutMillis: queryTimeoutMs,
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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: discardingUnanswered(pool) }) });
  let closed: Promise<void> | undefined;
  return {
    pool,
    db,
    // pg-pool's end() resolves once it has asked its idle clients to end, not once they have: wait for their
    // connections to close, so a Postgres stopped right after (the embedded one) does not cut them mid-goodbye and
    // every shutdown log a connection error.
    // Kysely ends the pool only if it ever used it (its driver starts lazily): a pool used only through `pool` (the
    // actor commits') is ended here.
    close: () =>
      (closed ??= db
        .destroy()
        .then(() => (pool.ending ? undefined : pool.end()))
        .then(() => settledWithin(Promise.all(open.values()), CLOSE_WAIT_MS))),
  };
}

/**
 * The pool as Kysely sees it, except that a connection whose query failed without an answer from Postgres (the
 * client's query timeout, a broken connection) is released as broken, so the pool closes it. Kysely releases every
 * connection as healthy, and pg keeps a timed-out query as the connection's active one: reused, that connection would
 * make every later query wait behind an answer that may never come. (pg-pool's own `pool.query` already releases a
 * failed client as broken.)
 */
function discardingUnanswered(pool: pg.Pool): PostgresPool {
  return {
    options: pool.options,
    connect: async () => new DiscardingClient(await pool.connect()),
    end: () => pool.end(),
  };
}

class DiscardingClient implements PostgresPoolClient {
  readonly #client: pg.PoolClient;
  /** The failure of a query that got no answer from Postgres: the connection is not to be used again. */
  #unanswered: unknown = undefined;

  constructor(client: pg.PoolClient) {
    this.#client = client;
  }

  /** Lets Kysely cancel a running query by its backend's pid (pg exposes it, untyped). */
  get processID(): number | undefined {
    return (this.#client as { processID?: number }).processID;
  }

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(statement: string | PostgresCursor<R>, parameters?: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // No cursor is configured on the dialect, so Kysely only ever sends text.
    if (typeof statement !== 'string') throw new Error('streaming queries are not configured');
    // A connection that already left a query unanswered is not asked again: the ROLLBACK Kysely sends after a failed
    // statement in a transaction would wait out a second timeout on the same silent backend.
    // Failing with that query's own error keeps it what the caller hears (Kysely rethrows a failed ROLLBACK's error).
    if (this.#unanswered !== undefined) return Promise.reject(this.#unanswered);
    return this.#client.query(statement, [...(parameters ?? [])]).then(
      (result) => result as unknown as PostgresQueryResult<R>,
      (error: unknown) => {
        if (!(error instanceof pg.DatabaseError)) this.#unanswered = error;
        throw error;
      },
    );
  }

  release(destroy?: boolean): void {
    this.#client.release(destroy === true || this.#unanswered !== undefined);
  }
}
