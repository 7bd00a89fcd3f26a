import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createActor } from 'xstate';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind, counterMachine } from '../fixtures/counter.kind.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * An actor whose stored state no longer restores is refused activation until a fixed build or an operator mends it:
 * /metrics says how many there are, so an operator learns of them from an alert, not from a user.
 */
let db: TestDatabase;
let server: TestServer;
withTestServer(test, (started) => ({ db, server } = started), { kinds: [counterKind] });

const at = Date.parse('2026-05-01T00:00:00Z');
const unrestorable = async () => /^registry_actors_unrestorable (\d+)$/m.exec(await (await fetch(`${server.opsUrl}/metrics`)).text())?.[1];

test('actors whose stored state does not restore are counted in registry_actors_unrestorable', async () => {
  assert.is(await unrestorable(), '0');
  const store = new PostgresActorStore(db.connection);
  const snapshot = counterMachine.getPersistedSnapshot(createActor(counterMachine).getSnapshot());
  for (const key of ['poisoned-1', 'poisoned-2']) {
    const journal = [{ version: 1, event: { type: 'counter.add', amount: 0 }, at }];
    assert.is((await store.commit([{ kind: 'counter', key, baseVersion: 0, epoch: 3, journal, snapshot: { version: 1, snapshot, timers: {} } }])).fenced.size, 0);
    // An event this build's machine throws on, journaled after the snapshot: replaying it fails.
    assert.is((await store.commit([{ kind: 'counter', key, baseVersion: 1, epoch: 3, journal: [{ version: 2, event: { type: 'counter.poison' }, at: at + 2 }] }])).fenced.size, 0);
    const refused = await server.services.host.send('counter', key, { type: 'counter.add', amount: 1 }).then(() => 'accepted', (error: unknown) => String(error));
    assert.ok(refused !== 'accepted', 'the actor is not activated');
  }
  assert.is(await unrestorable(), '2');
});

test.run();
