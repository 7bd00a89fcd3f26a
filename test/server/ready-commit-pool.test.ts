import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { STORAGE_CHECK_FRESH_MS } from '../../transport/http/routes/status.routes.js';
import { runtimePerson, testEnvironment } from '../support/runtime.js';
import { startTestServer, type TestServer } from '../support/server.js';

/**
 * Actor commits use a pool of their own (server.ts commitStorage), so GET /ready pings it too, not only the
 * shared pool (store.ping() → #db). When the commit pool cannot get a connection (here: the role's connection limit
 * is reached, as with max_connections / a managed Postgres per-role limit) while the shared pool keeps warm
 * connections, every actor write fails and the node still reports itself ready. Before the change both went through
 * one pool, so a passing ping meant a connection commits could use.
 */
const admin = (): pg.Client => new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
let role: string;
let dbName: string;
let server: TestServer | undefined;

test.before(async () => {
  role = `rv_${randomBytes(5).toString('hex')}`;
  dbName = `rvdb_${randomBytes(5).toString('hex')}`;
  const c = admin();
  await c.connect();
  try {
    await c.query(`CREATE ROLE ${role} LOGIN PASSWORD 'rvpw'`);
    await c.query(`CREATE DATABASE ${dbName} OWNER ${role}`);
  } finally {
    await c.end();
  }
});

test.after(async () => {
  await server?.stop('test over');
  const c = admin();
  await c.connect();
  try {
    await c.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await c.query(`DROP ROLE IF EXISTS ${role}`);
  } finally {
    await c.end();
  }
});

test('/ready is not 200 while actor commits cannot get a connection of their pool', async () => {
  const url = new URL(process.env.TEST_DATABASE_URL!);
  url.username = role;
  url.password = 'rvpw';
  url.pathname = `/${dbName}`;
  server = await startTestServer(url.toString(), productParts, { RUNTIME_LEASE_TTL_SECONDS: '3600' });
  const pete = await runtimePerson(server, 'pete');
  const world = await testEnvironment(server.opsUrl, 'ready-world', 'pete');
  // Warm: actor commits ran, both pools have connections.
  await (await pete.runtime(world)).open();
  assert.is((await fetch(`${server.url}/ready`)).status, 200);

  const c = admin();
  await c.connect();
  try {
    // The commit pool's connections go (a failover, an idle reaper) and the role has no room for new ones.
    const live = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1 AND application_name NOT LIKE '%/commits'`, [role]);
    await c.query(`ALTER ROLE ${role} CONNECTION LIMIT ${live.rows[0]!.n}`);
    await c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND application_name LIKE '%/commits'`, [role]);
    await new Promise((r) => setTimeout(r, 300));

    // An actor write: a new Runtime session of pete (its lease actor commits the place).
    const page = await pete.runtime(world);
    const created = await page.createSession();
    const createdBody = await created.text();
    // The last check's answer is reused for up to STORAGE_CHECK_FRESH_MS.
    await new Promise((r) => setTimeout(r, STORAGE_CHECK_FRESH_MS + 100));
    const ready = await fetch(`${server.url}/ready`);
    const readyBody = await ready.text();
    assert.ok(
      created.status < 500 || ready.status !== 200,
      `actor writes fail (${created.status} ${createdBody}) yet /ready answers ${ready.status} ${readyBody}`,
    );
  } finally {
    await c.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
    await c.end();
  }
});

test.run();
