import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { connectStorage, type StorageConnection } from '../../storage/connect.js';
import { startEmbeddedPostgres, type RunningPostgres } from '../../storage/embedded-postgres.js';
import { migrateToLatest } from '../../storage/migrate.js';

export interface BenchDatabase {
  readonly connection: StorageConnection;
  /** The database's connection string, for a server under test in another process. */
  readonly url: string;
  /** Where the database runs, for the report: `embedded` or the host:port of BENCH_DATABASE_URL. */
  readonly where: string;
  /**
   * Forces a checkpoint, so one of Postgres's own (every ~540 MB of WAL by default) does not land inside a measured
   * phase of one path and not the other. False when the role may not (a non-superuser on BENCH_DATABASE_URL).
   */
  checkpoint(): Promise<boolean>;
  /**
   * VACUUM (ANALYZE) of `tables`, then a checkpoint: a phase then starts on tables without the dead row versions an
   * earlier phase left (which its index probes would step over, and which autovacuum would otherwise clean up inside
   * some later window). False when either was refused.
   */
  settle(tables: readonly string[]): Promise<boolean>;
  /** Closes the pool, drops the database, stops the embedded cluster and removes its directory. Idempotent. */
  close(): Promise<void>;
}

/**
 * A fresh, migrated database: on the cluster named by `clusterUrl` when given (left running, the database dropped
 * afterwards), otherwise on an embedded Postgres started in a new temp directory and removed afterwards.
 */
export async function openBenchDatabase(options: {
  readonly clusterUrl: string | undefined;
  readonly maxConnections: number;
}): Promise<BenchDatabase> {
  let postgres: RunningPostgres | undefined;
  let directory: string | undefined;
  let adminUrl = options.clusterUrl;
  let connection: StorageConnection | undefined;
  let created = false;
  const name = `bench_${randomBytes(5).toString('hex')}`;
  let closing: Promise<void> | undefined;

  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await connection?.close().catch(() => {});
      if (created && adminUrl) await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await postgres?.stop().catch(() => {});
      if (directory) await rm(directory, { recursive: true, force: true }).catch(() => {});
    })());

  try {
    if (!adminUrl) {
      directory = await mkdtemp(path.join(tmpdir(), 'registry-bench-pg-'));
      postgres = await startEmbeddedPostgres({ directory });
      adminUrl = postgres.connectionString;
    }
    await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
    created = true;
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    connection = connectStorage({
      connectionString: url.toString(),
      maxConnections: options.maxConnections,
      applicationName: 'registry-bench',
    });
    await migrateToLatest(connection.db);
    const where = options.clusterUrl ? `BENCH_DATABASE_URL (${new URL(options.clusterUrl).host})` : 'embedded';
    const pool = connection.pool;
    const checkpoint = (): Promise<boolean> => pool.query('CHECKPOINT').then(() => true, () => false);
    const settle = async (tables: readonly string[]): Promise<boolean> => {
      const vacuumed = await pool.query(`VACUUM (ANALYZE) ${tables.map((t) => pg.escapeIdentifier(t)).join(', ')}`).then(() => true, () => false);
      return (await checkpoint()) && vacuumed;
    };
    return { connection, url: url.toString(), where, checkpoint, settle, close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
