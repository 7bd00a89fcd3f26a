import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { claimDatabase } from '../../storage/database-owner.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rejects } from '../support/assert.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/** Single-node mode: one server per database, held by an advisory lock for the server's whole life. */
let db: TestDatabase;
const quiet = { warn: () => {}, error: () => {}, info: () => {} };

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('a second server on the same database refuses to start; once the first stops, it starts', async () => {
  const first = await startTestServer(db.url, productParts);
  try {
    await rejects(() => startTestServer(db.url, productParts), (error) => error instanceof Error && /another server holds this database/.test(error.message));
    assert.is((await fetch(`${first.url}/ready`)).status, 200, 'the first still serves');
  } finally {
    await first.stop('test');
  }
  const second = await startTestServer(db.url, productParts);
  assert.is((await fetch(`${second.url}/ready`)).status, 200);
  await second.stop('test');
});

test('ownership lost with its connection is claimed again; while another holds it, that is logged as an error', async () => {
  const logged: string[] = [];
  const log = { warn: (_: unknown, m: string) => void logged.push(`warn ${m}`), error: (_: unknown, m: string) => void logged.push(`error ${m}`), info: (_: unknown, m: string) => void logged.push(`info ${m}`) };
  const release = await claimDatabase(db.url, log);
  const holders = async () =>
    (await db.connection.pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = 'registry-coordination/owner' AND datname = current_database()")).rows;
  const [holder] = await holders();
  assert.ok(holder);
  // Another claimant meanwhile gets in first: the lost owner says so until the other lets go.
  await db.connection.pool.query('SELECT pg_terminate_backend($1)', [holder.pid]);
  const other = await waitFor(async () => {
    try {
      return await claimDatabase(db.url, quiet);
    } catch {
      return undefined;
    }
  }, 'the lock free for another claimant');
  await waitFor(() => logged.some((l) => l.startsWith('error another server holds this database')), 'the error while another holds it');
  await other();
  await waitFor(() => logged.includes('info database ownership claimed again'), 'the claim taken back');
  await rejects(() => claimDatabase(db.url, quiet), (error) => error instanceof Error && /another server holds/.test(error.message));
  await release();
  await (await claimDatabase(db.url, quiet))();
});

test.run();
