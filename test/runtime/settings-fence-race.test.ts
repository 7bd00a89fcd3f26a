import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertProblem } from '../support/identity.js';
import { installPlugin, LONG_LEASE_ENV, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A settings write passes the Runtime fence when its request starts, then may wait (here on the (Plugin, account)
 * advisory lock, which any concurrent settings writer of the same person holds; in production also a slow pool, GC,
 * a lock queue). Whatever happened to its session meanwhile must decide the write: the fence is checked again inside
 * the write's transaction once its locks are held, with the codes of the credential check, and nothing is written.
 */
let db: TestDatabase;
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';
/** plugins/settings/plugin-settings.ts ACCOUNT_LOCK. */
const ACCOUNT_LOCK = 0x5e77_0002;
const DEFAULTS = { defaultMuted: true, volume: 0.8 };

withTestServer(test, (started) => ({ db, server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'fence-world', 'pete');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
});

interface Settings {
  resolved: Record<string, unknown>;
  provenance: Record<string, string>;
  etag: string;
}

const read = async (page: RuntimeClient): Promise<Settings> => {
  const res = await page.fenced(MEDIA);
  assert.is(res.status, 200, await res.clone().text());
  return (await jsonOf(res)) as unknown as Settings;
};

/**
 * Runs `during` while another writer of pete's settings holds the (Plugin, account) lock; the lock goes when `during`
 * calls `release` or ends, whichever is first, so a failed assertion never leaves it held.
 */
async function withAccountLockHeld(during: (release: () => Promise<void>) => Promise<void>): Promise<void> {
  let unlock!: () => void;
  const held = new Promise<void>((resolve) => (unlock = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.connection.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${ACCOUNT_LOCK}::int4, hashtext(${`plg_media ${pete.accountId}`}))`.execute(trx);
    locked();
    await held;
  });
  await lockTaken;
  const release = async (): Promise<void> => {
    unlock();
    await holder;
  };
  try {
    await during(release);
  } finally {
    await release();
  }
}

const someoneWaitsOnTheLock = () =>
  waitFor(async () => {
    const rows = await sql<{ n: string }>`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`.execute(db.connection.db);
    return Number(rows.rows[0]!.n) > 0;
  }, 'the write to wait on the account lock');

test('a PUT whose session is superseded while it waits for its locks is refused 409 runtime_session_superseded, and writes nothing', async () => {
  const a = await (await pete.runtime(world)).open();
  const { etag } = await read(a);
  let b!: RuntimeClient;
  let write!: Promise<Response>;
  await withAccountLockHeld(async (release) => {
    write = a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.3 } }, headers: { 'if-match': etag } });
    await someoneWaitsOnTheLock();
    // Pete's new Runtime takes the lease: A is superseded, and B reads the settings.
    b = await (await pete.runtime(world)).open();
    assert.is(await sessionState(a), 'superseded');
    assert.equal((await read(b)).resolved, DEFAULTS);
    await release();
  });
  await assertProblem(await write, 409, 'runtime_session_superseded');
  assert.equal((await read(b)).resolved, DEFAULTS, 'nothing written by a session that no longer holds the lease');
});

test('a DELETE whose page lost the lease and took it back while it waits is refused 409 runtime_lease_stale, and clears nothing', async () => {
  const page = await (await pete.runtime(world)).open();
  const before = await read(page);
  const put = await page.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.5 } }, headers: { 'if-match': before.etag } });
  assert.is(put.status, 200, await put.clone().text());
  const { etag } = (await jsonOf(put)) as unknown as Settings;
  const oldLease = page.lease!;
  let clear!: Promise<Response>;
  await withAccountLockHeld(async () => {
    clear = page.fenced(`${MEDIA}?layer=user`, { method: 'DELETE', headers: { 'if-match': etag } });
    await someoneWaitsOnTheLock();
    // Another Runtime of pete's takes the lease and the page takes it back: the page is active again, under a new
    // version, and the claims the DELETE carries are old.
    await (await pete.runtime(world)).open();
    assert.is(await sessionState(page), 'superseded');
    const again = await page.activate();
    assert.is(again.status, 200, await again.clone().text());
    assert.is(await sessionState(page), 'active');
    assert.ok(page.lease!.leaseVersion > oldLease.leaseVersion, 'taking the lease back grants a new version');
  });
  await assertProblem(await clear, 409, 'runtime_lease_stale');
  assert.equal((await read(page)).resolved, { ...DEFAULTS, volume: 0.5 }, 'nothing cleared under a lease that is no longer current');
});

test('an outage while the fence is checked again answers 503 runtime_coordination_unavailable, and writes nothing', async () => {
  const page = await (await pete.runtime(world)).open();
  const before = await read(page);
  const { sessions } = await runtimeServices(server.services);
  const original = sessions.requireLease.bind(sessions);
  let checks = 0;
  // The credential check passes; the one inside the write's transaction meets the outage.
  sessions.requireLease = async (caller, sessionId, lease) => {
    if (sessionId === page.sessionId && ++checks === 2) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' });
    return original(caller, sessionId, lease);
  };
  let res: Response;
  try {
    res = await page.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.1 } }, headers: { 'if-match': before.etag } });
  } finally {
    sessions.requireLease = original;
  }
  assert.is(checks, 2, 'the fence was checked at the request and again in the write');
  await assertProblem(res, 503, 'runtime_coordination_unavailable');
  assert.ok(Number(res.headers.get('retry-after')) > 0, 'Retry-After');
  assert.equal(await read(page), before, 'nothing written');
});

test.run();
