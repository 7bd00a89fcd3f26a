import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createActor } from 'xstate';
import { ActorFencedError } from '../../actors/errors.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind, counterMachine } from '../fixtures/counter.kind.js';
import { rejects } from '../support/assert.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A write the store's fence refuses (another activation stored a newer epoch) used to show on /metrics only as a
 * deactivation: registry_commit_entries_fenced_total counts them, from 0, so two nodes owning one actor alert.
 */
let db: TestDatabase;
let server: TestServer;
withTestServer(test, (started) => ({ db, server } = started), { kinds: [counterKind] });

const fenced = async () => /^registry_commit_entries_fenced_total (\d+)$/m.exec(await (await fetch(`${server.opsUrl}/metrics`)).text())?.[1];

test('each entry a commit refused by the fence is counted once in registry_commit_entries_fenced_total', async () => {
  assert.is(await fenced(), '0', 'exported from the start');
  const { host } = server.services;
  for (const key of ['fenced-1', 'fenced-2']) {
    await host.send('counter', key, { type: 'counter.add', amount: 1 }); // this server's activation writes version 1
    // Another writer (a second node) stores version 2 under a newer epoch: this server's next write must lose.
    const snapshot = counterMachine.getPersistedSnapshot(createActor(counterMachine).getSnapshot());
    const journal = [{ version: 2, event: { type: 'counter.add', amount: 10 }, at: Date.now() }];
    const outcome = await new PostgresActorStore(db.connection).commit([
      { kind: 'counter', key, baseVersion: 1, epoch: 50, journal, snapshot: { version: 2, snapshot, timers: {} } },
    ]);
    assert.is(outcome.fenced.size, 0);
    await rejects(() => host.send('counter', key, { type: 'counter.add', amount: 100 }), (e: unknown) => e instanceof ActorFencedError);
  }
  assert.is(await fenced(), '2');
});

test.run();
