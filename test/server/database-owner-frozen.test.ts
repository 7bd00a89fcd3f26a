import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { spawnServer } from '../support/process.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A server holds the database for its whole life by an advisory lock on a connection of its own. A server killed on
 * its own host closes that connection (the kernel does), but one whose host died, was cut off or froze closes
 * nothing: Postgres kept its idle connection, and the lock, until TCP keepalive gave up on it (about two hours by
 * default), and every start meanwhile refused. The owner's connection now says it is alive every few seconds, and
 * Postgres ends it once it has been silent for OWNER_SILENCE_LIMIT_MS. A stopped process (SIGSTOP) is such a server:
 * its sockets stay open and it sends nothing. When it comes back (a paused VM resumed, a partition healed) and finds
 * the database taken over, it must not serve beside the new owner (its epochs and replay guard are in memory): it
 * stops, and exits 1.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

test('a server that froze gives the database up: a new server starts within a minute; the old one, resumed, stops', async () => {
  const frozen = await spawnServer('dist/server/main.js', { DATABASE_URL: db.url });
  let next: TestServer | undefined;
  try {
    frozen.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    next = await waitFor(
      async () => {
        try {
          return await startTestServer(db.url, productParts);
        } catch (error) {
          if (error instanceof Error && /another server holds this database/.test(error.message)) return undefined;
          throw error;
        }
      },
      'a new server to take the database over',
      60_000,
    );
    assert.ok(Date.now() - frozenAt >= 5_000, 'not while the first could merely be slow');
    assert.is((await fetch(`${next.url}/ready`)).status, 200);

    frozen.child.kill('SIGCONT');
    const exit = await Promise.race([frozen.exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 20_000))]);
    assert.equal(exit, { code: 1, signal: null }, 'the resumed server stops once it finds the database taken');
    assert.ok(frozen.lines.some((l) => l.includes('another server took this database over')), frozen.lines.slice(-5).join('\n'));
    assert.is((await fetch(`${next.url}/ready`)).status, 200, 'the new owner serves on');
  } finally {
    frozen.child.kill('SIGKILL');
    await frozen.exited;
    await next?.stop('test over');
  }
});

test.run();
