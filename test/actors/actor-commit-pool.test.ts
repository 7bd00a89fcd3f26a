import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { systemClock } from '../../actors/clock.js';
import { connectStorage, type StorageConnection } from '../../storage/connect.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind } from '../fixtures/counter.kind.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';

/**
 * Actor commits and loads have connections of their own (the server gives the store a pool of one per commit lane,
 * and one for loads): requests that hold every connection of the shared pool while they wait for actor replies cannot
 * keep those replies' commits, or the loads of the actors they wait for, from running.
 */
let db: TestDatabase;
withActorStore(test, (opened) => ({ db } = opened));

test('with every connection of the shared pool held, a live actor still commits through its own pool', async () => {
  const shared: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 2 });
  const commits: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 2 });
  const host = hostFor(new PostgresActorStore({ ...shared, commitPool: commits.pool }), systemClock, [counterKind]);
  try {
    assert.is((await host.send('counter', 'busy-pool', { type: 'counter.add', amount: 1 })).version, 1, 'loaded and live');
    const held = await Promise.all([shared.pool.connect(), shared.pool.connect()]);
    try {
      const reply = await Promise.race([
        host.send('counter', 'busy-pool', { type: 'counter.add', amount: 2 }),
        new Promise<'stalled'>((resolve) => setTimeout(() => resolve('stalled'), 3_000).unref()),
      ]);
      assert.ok(reply !== 'stalled', 'the commit waited for the shared pool');
      assert.is(reply.version, 2);
    } finally {
      for (const client of held) client.release();
    }
    await host.drain();
  } finally {
    await shared.close();
    await commits.close();
  }
});

test('with every connection of the shared pool held, an actor that must be loaded still loads through its own pool', async () => {
  const shared: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 1 });
  const commits: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 1 });
  const loads: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 1 });
  const store = new PostgresActorStore({ ...shared, commitPool: commits.pool, loadPool: loads.pool });
  try {
    const first = hostFor(store, systemClock, [counterKind]);
    await first.send('counter', 'stored', { type: 'counter.add', amount: 5 });
    await first.drain();
    // A new host: the actor is in the store only, and its next event needs a load.
    const host = hostFor(store, systemClock, [counterKind]);
    const held = await shared.pool.connect();
    try {
      const reply = await Promise.race([
        host.send('counter', 'stored', { type: 'counter.add', amount: 1 }),
        new Promise<'stalled'>((resolve) => setTimeout(() => resolve('stalled'), 3_000).unref()),
      ]);
      assert.ok(reply !== 'stalled', 'the load waited for the shared pool');
      assert.is(reply.version, 2);
      assert.is((reply.snapshot.context as { total: number }).total, 6);
    } finally {
      held.release();
    }
    await host.drain();
  } finally {
    await shared.close();
    await commits.close();
    await loads.close();
  }
});

test('a pool whose every connection is at work answers the readiness ping at once instead of queueing it behind the work', async () => {
  const shared: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 1 });
  const commits: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 1 });
  const loads: StorageConnection = connectStorage({ connectionString: db.url, maxConnections: 1 });
  const store = new PostgresActorStore({ ...shared, commitPool: commits.pool, loadPool: loads.pool });
  try {
    await store.ping();
    const held = await Promise.all([shared.pool.connect(), commits.pool.connect(), loads.pool.connect()]);
    try {
      const answer = await Promise.race([
        store.ping().then(() => 'ready' as const),
        new Promise<'queued'>((resolve) => setTimeout(() => resolve('queued'), 2_000).unref()),
      ]);
      assert.is(answer, 'ready');
    } finally {
      for (const client of held) client.release();
    }
  } finally {
    await shared.close();
    await commits.close();
    await loads.close();
  }
});

test.run();
