import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { systemClock } from '../../actors/clock.js';
import { ActorCommitFailedError } from '../../actors/errors.js';
import { connectStorage, type StorageConnection } from '../../storage/connect.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { hostFor, interceptCommits } from '../support/host.js';
import { proxyDatabase, type TcpProxy } from '../support/tcp-proxy.js';
import { waitFor } from '../support/wait.js';

/**
 * A group commit whose answer is lost while Postgres is briefly unreachable (restarting, a connection cut): the lane
 * cannot ask at once which of its entries landed. Failing their replies then would tell senders to send again events
 * that may be stored, and a retry would apply them twice. The lane asks again for a bounded time instead, so a short
 * outage resolves the truth; a commit that never reached Postgres is refused at once, since nothing of it landed.
 *
 * The commits go through a TCP proxy to the real Postgres, which the test cuts (connections dropped, new ones refused).
 */
let db: TestDatabase;
let proxy: TcpProxy;
let commits: StorageConnection;
let store: PostgresActorStore;

test.before(async () => {
  db = await createTestDatabase();
  let url: string;
  ({ proxy, url } = await proxyDatabase(db.url));
  commits = connectStorage({ connectionString: url, maxConnections: 1 });
  store = new PostgresActorStore({ ...db.connection, commitPool: commits.pool });
});
test.after(async () => {
  await commits.close();
  await proxy.close();
  await db.drop();
});

const add = (amount: number) => ({ type: 'counter.add', amount });
const totalOf = (snapshot: unknown): number => (snapshot as { context: { total: number } }).context.total;

/** The real store, whose next commit applies and then loses its answer to a cut that lasts `outageMs`. */
function losingToAnOutage(outageMs: number) {
  let armed = false;
  let over: Promise<void> | undefined;
  const s = interceptCommits(store, async (entries, commit) => {
    if (!armed) return commit(entries);
    armed = false;
    await commit(entries);
    await proxy.cut();
    over = new Promise((resolve) => setTimeout(resolve, outageMs)).then(() => proxy.restore());
    throw new Error('Connection terminated unexpectedly');
  });
  return { store: s, arm: () => void (armed = true), over: () => over };
}

test('a commit whose answer was lost in a short outage is asked about until Postgres answers: its sender hears it landed', async () => {
  const flaky = losingToAnOutage(1_500);
  const host = hostFor(flaky.store, systemClock, [counterKind], { commitLanes: 1 });
  try {
    assert.is((await host.send('counter', 'short-outage', add(1))).version, 1);
    flaky.arm();
    const reply = await host.send('counter', 'short-outage', add(10)).then(
      (r) => r.version,
      (e: unknown) => String(e),
    );
    assert.is(reply, 2, 'the stored event is acknowledged, not refused as retryable');
    const next = await host.send('counter', 'short-outage', add(100));
    assert.is(next.version, 3);
    assert.is(totalOf(next.snapshot), 111, 'each event applied once');
  } finally {
    await flaky.over();
    await host.drain();
  }
});

test('an outage longer than the asking fails the replies retryably once the bound has passed, not before', async () => {
  const flaky = losingToAnOutage(4_000);
  const host = hostFor(flaky.store, systemClock, [counterKind], { commitLanes: 1, landedAskMs: 1_500 });
  try {
    await host.send('counter', 'long-outage', add(1));
    flaky.arm();
    const started = performance.now();
    await rejects(() => host.send('counter', 'long-outage', add(10)), (e: unknown) => e instanceof ActorCommitFailedError && e.retryable);
    const waited = performance.now() - started;
    assert.ok(waited >= 1_400 && waited < 3_500, `refused after ${Math.round(waited)} ms`);
  } finally {
    await flaky.over();
    await host.drain();
  }
  // The gap that remains: the event did land, although its sender was told to retry.
  assert.is((await store.load('counter', 'long-outage'))?.version, 2);
});

test('a commit whose connection was cut while its statement still runs is not judged before it ends: its sender hears it landed', async () => {
  const host = hostFor(store, systemClock, [counterKind], { commitLanes: 1 });
  const locker = await db.connection.pool.connect();
  try {
    assert.is((await host.send('counter', 'still-running', add(1))).version, 1);
    // The next commit waits for this lock (reads of the journal do not), as one waits for a slow flush or a lock.
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE actor_journal IN EXCLUSIVE MODE');
    const reply = host.send('counter', 'still-running', add(10)).then(
      (r) => r.version,
      (e: unknown) => String(e),
    );
    await waitFor(
      async () => (await db.connection.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows.length > 0,
      'the commit to wait for the lock',
    );
    // Its answer is lost; Postgres runs on, and the statement with it.
    await proxy.cut();
    await proxy.restore();
    await new Promise((r) => setTimeout(r, 1_000));
    await locker.query('COMMIT');
    assert.is(await reply, 2, 'the event that landed is acknowledged, not refused as retryable');
    const next = await host.send('counter', 'still-running', add(100));
    assert.is(next.version, 3);
    assert.is(totalOf(next.snapshot), 111);
  } finally {
    await locker.query('ROLLBACK').catch(() => {});
    locker.release();
    await host.drain();
  }
});

test('a commit that could not reach Postgres at all is refused at once, without waiting for an answer', async () => {
  const host = hostFor(store, systemClock, [counterKind], { commitLanes: 1 });
  await host.send('counter', 'never-sent', add(1));
  await proxy.cut();
  // Once the pool has let its broken connection go: a statement written to a connection that breaks may have landed.
  await waitFor(() => commits.pool.totalCount === 0, 'the pool to drop its cut connection');
  try {
    const started = performance.now();
    await rejects(() => host.send('counter', 'never-sent', add(10)), (e: unknown) => e instanceof ActorCommitFailedError && e.retryable);
    const waited = performance.now() - started;
    assert.ok(waited < 1_000, `refused after ${Math.round(waited)} ms`);
    await proxy.restore();
    const next = await host.send('counter', 'never-sent', add(100));
    assert.is(next.version, 2);
    assert.is(totalOf(next.snapshot), 101);
  } finally {
    await proxy.restore();
    await host.drain();
  }
});

test.run();
