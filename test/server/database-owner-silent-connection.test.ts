import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { claimDatabase, OWNER_SILENCE_LIMIT_MS } from '../../storage/database-owner.js';
import { rejects } from '../support/assert.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { proxyDatabase, type TcpProxy } from '../support/tcp-proxy.js';
import { waitFor } from '../support/wait.js';

/**
 * The owner's connection can go silent without closing (a middlebox that dropped its state black-holes it while new
 * connections pass; a half-open connection after a network fault). Postgres ends such a session once it has been
 * silent for OWNER_SILENCE_LIMIT_MS, and the lock with it; the server, whose heartbeat waited for an answer that
 * never came, went on as owner without the lock (until TCP gave up, about 15 minutes), so a second server could start
 * beside it. An unanswered heartbeat now counts as a lost connection: ownership is claimed again (ending this
 * server's own silent session first, which still holds the lock), and it stops only when another server holds it.
 *
 * The owner's connection goes through a TCP proxy to the real Postgres, which the test stalls.
 */
let db: TestDatabase;
let proxy: TcpProxy;
let proxiedUrl: string;

test.before(async () => {
  db = await createTestDatabase();
  ({ proxy, url: proxiedUrl } = await proxyDatabase(db.url));
});
test.after(async () => {
  await proxy.close();
  await db.drop();
});

test('an owner whose connection went silent claims the database again; no other server can start once Postgres ends the silent session', async () => {
  const logged: string[] = [];
  const log = { warn: (_: unknown, m: string) => void logged.push(`warn ${m}`), error: (_: unknown, m: string) => void logged.push(`error ${m}`), info: (_: unknown, m: string) => void logged.push(`info ${m}`) };
  let taken = false;
  const release = await claimDatabase(proxiedUrl, log, () => void (taken = true));
  try {
    const stalledAt = Date.now();
    proxy.stall();
    // Past the point where Postgres has ended the silent session and released its lock.
    await new Promise((r) => setTimeout(r, OWNER_SILENCE_LIMIT_MS + 5_000));
    await rejects(
      () => claimDatabase(db.url, { warn: () => {}, error: () => {}, info: () => {} }),
      (error) => error instanceof Error && /another server holds this database/.test(error.message),
    );
    assert.ok(logged.includes('info database ownership claimed again'), logged.join('\n'));
    assert.not.ok(taken, 'this server stopped as if another held the database');
    assert.ok(Date.now() - stalledAt >= OWNER_SILENCE_LIMIT_MS);
  } finally {
    await release();
  }
  // Released for good: the next claimant gets it.
  await (await waitFor(() => claimDatabase(db.url, { warn: () => {}, error: () => {}, info: () => {} }).catch(() => undefined), 'the database free'))();
});

test('a claim that meets a silent Postgres gives up and tries again: ownership is claimed once Postgres answers', async () => {
  const logged: string[] = [];
  const log = { warn: (_: unknown, m: string) => void logged.push(`warn ${m}`), error: (_: unknown, m: string) => void logged.push(`error ${m}`), info: (_: unknown, m: string) => void logged.push(`info ${m}`) };
  const release = await claimDatabase(proxiedUrl, log);
  try {
    // New connections now reach something that accepts them and never answers (a balancer in front of a dead
    // primary); the owner's own session is ended, so it must claim again through them.
    proxy.blackHoleNew(true);
    await db.connection.pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'registry-coordination/owner' AND datname = current_database()");
    await waitFor(() => logged.some((l) => l.startsWith('warn the connection holding database ownership was lost')), 'the loss noticed');
    await new Promise((r) => setTimeout(r, 5_000));
    proxy.blackHoleNew(false);
    await waitFor(() => logged.includes('info database ownership claimed again'), 'the claim taken back once Postgres answers', 30_000);
    await rejects(
      () => claimDatabase(db.url, { warn: () => {}, error: () => {}, info: () => {} }),
      (error) => error instanceof Error && /another server holds this database/.test(error.message),
    );
  } finally {
    proxy.blackHoleNew(false);
    await release();
  }
});

test.run();
