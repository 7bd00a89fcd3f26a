import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { connectStorage, type StorageConnection } from '../../storage/connect.js';
import { migrateToLatest } from '../../storage/migrate.js';

export interface TestDatabase {
  readonly url: string;
  readonly connection: StorageConnection;
  /** Drops the database (closing what still uses it). */
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run tests through `npm test`');
  return url;
}

/** A fresh, migrated database on the test cluster: tests never share state. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  const connection = connectStorage({ connectionString: url.toString() });
  await migrateToLatest(connection.db);
  return {
    url: url.toString(),
    connection,
    async drop() {
      await connection.close();
      const client = new pg.Client({ connectionString: adminUrl() });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
