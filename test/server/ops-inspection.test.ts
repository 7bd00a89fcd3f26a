import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createActor } from 'xstate';
import type { JournalRecord } from '../../storage/actor-store.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { counterKind, counterMachine } from '../fixtures/counter.kind.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** The operator listener's inspection routes when it matters most: actors whose stored state no longer restores. */
let db: TestDatabase;
let server: TestServer;
withTestServer(test, (started) => ({ db, server } = started), { kinds: [counterKind] });

const ops = async (path: string) => {
  const res = await fetch(`${server.opsUrl}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const at = Date.parse('2026-05-01T00:00:00Z');
const tick = (version: number, event: unknown): JournalRecord => ({ version, event, at: at + version });

/** An actor stored at version 1 (snapshot and journal), as any write leaves it. */
async function storedAtOne(key: string): Promise<PostgresActorStore> {
  const store = new PostgresActorStore(db.connection);
  const snapshot = counterMachine.getPersistedSnapshot(createActor(counterMachine).getSnapshot());
  const first = { kind: 'counter', key, baseVersion: 0, epoch: 3, journal: [tick(1, { type: 'counter.add', amount: 0 })], snapshot: { version: 1, snapshot, timers: {} } };
  assert.is((await store.commit([first])).fenced.size, 0);
  return store;
}

interface Persisted {
  restores: boolean;
  restoreError?: string;
  version: number;
  snapshotVersion: number;
  epoch: number;
  stateVersion: number;
  currentStateVersion: number;
  snapshot: { value: string; context: { total: number } };
  recentJournal?: Array<{ version: number; event: { type: string }; stateVersion: number }>;
}

test('inspecting an actor whose journal no longer replays answers what is stored and why it does not restore, not a 500', async () => {
  const store = await storedAtOne('poisoned');
  // An event the machine (of this build) throws on, journaled after the snapshot: replaying it fails.
  assert.is((await store.commit([{ kind: 'counter', key: 'poisoned', baseVersion: 1, epoch: 3, journal: [tick(2, { type: 'counter.poison' })] }])).fenced.size, 0);
  const { status, body } = await ops('/actors/counter/poisoned');
  assert.is(status, 200, JSON.stringify(body));
  const persisted = body.persisted as Persisted;
  assert.equal(
    { restores: persisted.restores, version: persisted.version, snapshotVersion: persisted.snapshotVersion, epoch: persisted.epoch, value: persisted.snapshot.value },
    { restores: false, version: 2, snapshotVersion: 1, epoch: 3, value: 'counting' },
    'the stored snapshot row, as stored',
  );
  assert.match(persisted.restoreError ?? '', /poisoned/);
  assert.equal(persisted.recentJournal?.map((e) => [e.version, e.event.type]), [[2, 'counter.poison'], [1, 'counter.add']]);
});

test('inspecting an actor whose journal has a gap after its snapshot answers what is stored and the gap', async () => {
  await storedAtOne('gap');
  await sql`INSERT INTO actor_journal (kind, key, version, last_version, epoch, events)
            VALUES ('counter', 'gap', 3, 4, 3, ${JSON.stringify([[at + 3, { type: 'counter.add', amount: 1 }], [at + 4, { type: 'counter.add', amount: 2 }]])})`.execute(db.connection.db);
  const { status, body } = await ops('/actors/counter/gap');
  assert.is(status, 200, JSON.stringify(body));
  const persisted = body.persisted as Persisted;
  assert.equal(
    { restores: persisted.restores, version: persisted.version, snapshotVersion: persisted.snapshotVersion, epoch: persisted.epoch },
    { restores: false, version: 4, snapshotVersion: 1, epoch: 3 },
  );
  assert.match(persisted.restoreError ?? '', /gap before version 3/);
  assert.equal(persisted.recentJournal?.map((e) => e.version), [4, 3, 1]);
});

test('an actor that restores says so, with no journal in the answer', async () => {
  await storedAtOne('fine');
  const persisted = (await ops('/actors/counter/fine')).body.persisted as Persisted;
  assert.equal({ restores: persisted.restores, error: persisted.restoreError, journal: persisted.recentJournal }, { restores: true, error: undefined, journal: undefined });
  assert.equal({ stored: persisted.stateVersion, current: persisted.currentStateVersion }, { stored: 1, current: 1 });
});

test('the view names the state version of the snapshot row and of each journal entry, beside the one this build writes', async () => {
  const store = await storedAtOne('newer');
  // A segment a newer build wrote (state version 2) after the snapshot of version 1: this build (1) cannot read it.
  const later = { kind: 'counter', key: 'newer', baseVersion: 1, epoch: 3, stateVersion: 2, journal: [tick(2, { type: 'counter.add', amount: 1 })] };
  assert.is((await store.commit([later])).fenced.size, 0);
  const { status, body } = await ops('/actors/counter/newer');
  assert.is(status, 200, JSON.stringify(body));
  const persisted = body.persisted as Persisted;
  assert.equal(
    { restores: persisted.restores, stored: persisted.stateVersion, current: persisted.currentStateVersion },
    { restores: false, stored: 1, current: 1 },
  );
  assert.equal(persisted.recentJournal?.map((e) => [e.version, e.stateVersion]), [[2, 2], [1, 1]]);
  const journal = (await ops('/actors/counter/newer/journal')).body.entries as Array<{ version: number; stateVersion: number }>;
  assert.equal(journal.map((e) => [e.version, e.stateVersion]), [[2, 2], [1, 1]]);

  // A snapshot row a newer build wrote: the stored version, not this build's.
  const snapshot = counterMachine.getPersistedSnapshot(createActor(counterMachine).getSnapshot());
  const rewritten = { kind: 'counter', key: 'newer', baseVersion: 2, epoch: 3, stateVersion: 2, journal: [tick(3, { type: 'counter.add', amount: 1 })], snapshot: { version: 3, snapshot, timers: {} } };
  assert.is((await store.commit([rewritten])).fenced.size, 0);
  const again = (await ops('/actors/counter/newer')).body.persisted as Persisted;
  assert.equal({ restores: again.restores, stored: again.stateVersion, current: again.currentStateVersion }, { restores: false, stored: 2, current: 1 });
  assert.match(again.restoreError ?? '', /version 2/);
});

test('GET /actors pages live actors in (kind, key) order: a default and a largest limit, and a cursor', async () => {
  const host = server.services.host;
  const keys = Array.from({ length: 250 }, (_, i) => `paged-${String((i * 7919) % 250).padStart(3, '0')}`);
  await Promise.all(keys.map((key) => host.send('counter', key, { type: 'counter.add', amount: 1 })));
  type Page = { actors: Array<{ kind: string; key: string }>; count: number; total: number; next?: string };
  const first = (await ops('/actors?kind=counter')).body as unknown as Page;
  assert.is(first.actors.length, 100, 'the default page');
  assert.is(first.count, 100);
  assert.ok(first.total >= 250, `total ${first.total}`);
  const seen: string[] = [];
  let page: Page = first;
  for (let guard = 0; guard < 20; guard++) {
    seen.push(...page.actors.map((a) => a.key));
    if (page.next === undefined) break;
    page = (await ops(`/actors?kind=counter&limit=60&after=${encodeURIComponent(page.next)}`)).body as unknown as Page;
  }
  const paged = seen.filter((k) => k.startsWith('paged-'));
  assert.equal(paged, [...keys].sort(), 'every live actor once, in key order');
  assert.equal(seen, [...seen].sort(), 'pages follow each other in key order');
  const all = (await ops('/actors?limit=1000')).body as unknown as Page;
  assert.ok(all.actors.every((a, i) => i === 0 || `${all.actors[i - 1]!.kind}/${all.actors[i - 1]!.key}` < `${a.kind}/${a.key}`));
  assert.is((await ops('/actors?limit=1001')).status, 400, 'more than the largest page is refused');
  assert.is((await ops('/actors?after=no-slash')).status, 400, 'a cursor that is no kind/key is refused');
});

test.run();
