import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { installPlugin, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { MAX_QUEUED_WRITERS } from '../../plugins/settings/plugin-settings.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';
import { advisoryLockWaiters, withSettingsLockHeld } from '../support/settings-locks.js';

/**
 * Settings writes of one person that queue behind a lock hold at most one connection of the pool, so neither the
 * person's lease actor nor anybody else's request waits for the pool behind them. Before that: a
 * write's fence is checked in the person's lease turn before its transaction takes a connection, so a lease renewal
 * (started by a fenced request's credential check once a third of the lease has passed) still commits, and the queued
 * writes settle as soon as the lock is free.
 */
let db: TestDatabase;
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';
const POOL = 4;

withTestServer(test, (started) => ({ db, server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: '10', DATABASE_POOL_SIZE: String(POOL) });
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'stall-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
});


test('settings writes queued behind a lock while the lease renews settle promptly, and the lease holds (a small pool)', async () => {
  const a = await (await pete.runtime(world)).open();
  const first = await a.fenced(MEDIA);
  assert.is(first.status, 200);
  const { etag } = (await jsonOf(first)) as { etag: string };

  const writes: Promise<Response>[] = [];
  let started = 0;
  // An outside holder of pete's account lock (the test's own connection), so the writes queue on it.
  await withSettingsLockHeld(db, pete.accountId, async (release) => {
    const activatedAt = Date.now();
    const put = (i: number): Promise<Response> =>
      a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.1 + i / 10 } }, headers: { 'if-match': etag } });
    for (let i = 0; i < POOL - 1; i++) writes.push(put(i));
    await waitFor(async () => (await advisoryLockWaiters(db)) >= 1, 'the first write to wait on the account lock');
    // A third of the 10 s lease has passed: the next fenced request's credential check renews the lease in the
    // background, which needs a connection of the pool.
    await new Promise((r) => setTimeout(r, Math.max(0, activatedAt + 4_000 - Date.now())));
    writes.push(put(POOL - 1));
    await new Promise((r) => setTimeout(r, 300));
    started = Date.now();
    await release();
  });
  const results = await Promise.all(writes.map(async (w) => {
    const res = await w;
    return { status: res.status, code: ((await res.json()) as { code?: string }).code };
  }));
  const elapsed = Date.now() - started;
  assert.ok(elapsed < 5_000, `the writes took ${elapsed} ms to settle once the lock was free: ${JSON.stringify(results)}`);
  // One tag, four writes taking turns: the first wins, the others find the tag moved on.
  assert.equal(results.map((r) => r.status).sort(), [200, 412, 412, 412], JSON.stringify(results));
  assert.is((await a.fenced(MEDIA)).status, 200, 'the lease held');
});

test('a burst of one person\'s settings writes queued behind their lock leaves the pool to everyone else', async () => {
  const a = await (await pete.runtime(world)).open();
  const { etag } = (await jsonOf(await a.fenced(MEDIA))) as { etag: string };
  const quinn = await runtimePerson(server, 'quinn');
  const q = await (await quinn.runtime(world)).open();
  const writes: Promise<Response>[] = [];
  await withSettingsLockHeld(db, pete.accountId, async (release) => {
    // Values no earlier test left current (the first test's are 0.1–0.4): a write of the current value keeps the tag,
    // and a second writer holding it would then succeed too.
    for (let i = 0; i < POOL + 2; i++) {
      writes.push(a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: (10 + i) / 20 } }, headers: { 'if-match': etag } }));
    }
    await waitFor(async () => (await advisoryLockWaiters(db)) >= 1, 'the first write to wait on the account lock');
    await new Promise((r) => setTimeout(r, 300));
    // Pete's writes are all sent and his lock is still held: quinn's read needs a connection of the same pool.
    const started = Date.now();
    const read = await q.fenced(MEDIA);
    const elapsed = Date.now() - started;
    assert.is(read.status, 200, await read.text());
    assert.ok(elapsed < 2_000, `quinn's read waited ${elapsed} ms behind pete's queued writes`);
    await release();
  });
  const statuses = await Promise.all(writes.map(async (w) => (await w).status));
  // One tag, the writes taking turns: the first wins, the others find the tag moved on.
  assert.equal(statuses.sort(), [200, ...Array<number>(POOL + 1).fill(412)], JSON.stringify(statuses));
});

test('past a handful of writes under way, a person\'s next settings write is refused 429 at once', async () => {
  const a = await (await pete.runtime(world)).open();
  const { etag } = (await jsonOf(await a.fenced(MEDIA))) as { etag: string };
  const writes: Promise<{ status: number; code?: string }>[] = [];
  await withSettingsLockHeld(db, pete.accountId, async (release) => {
    // 0–0.45: none is the value the test before left current (0.5–0.75).
    for (let i = 0; i < MAX_QUEUED_WRITERS + 2; i++) {
      writes.push(
        a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: i / 20 } }, headers: { 'if-match': etag } }).then(async (res) => ({
          status: res.status,
          code: ((await res.json()) as { code?: string }).code,
        })),
      );
    }
    // The two over the limit (whichever arrived last) are answered while the others still wait on the lock.
    const settled: Array<{ status: number; code?: string }> = [];
    for (const w of writes) void w.then((result) => settled.push(result));
    await waitFor(async () => (settled.length >= 2 ? true : undefined), 'two writes to be refused while the lock is held');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(settled.map((w) => [w.status, w.code]), [[429, 'rate_limited'], [429, 'rate_limited']]);
    await release();
  });
  const statuses = (await Promise.all(writes)).map((w) => w.status).sort();
  assert.equal(statuses, [200, ...Array<number>(MAX_QUEUED_WRITERS - 1).fill(412), 429, 429], JSON.stringify(statuses));
});

test.run();
