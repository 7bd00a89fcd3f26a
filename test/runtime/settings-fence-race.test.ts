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
import { interceptSends } from '../support/host.js';
import { advisoryLockWaiters, withSettingsLockHeld } from '../support/settings-locks.js';

/**
 * A settings write is fenced by the Runtime lease outside the actors, so once it holds its connection and locks it
 * enters the person's lease turn (RuntimeSessions.holdLease), checks the fence there and leaves after its commit. A
 * page superseded while its write waited is refused; an activation waits only for a write that holds the turn, and
 * the new holder then reads what it wrote.
 */
let db: TestDatabase;
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
const MEDIA = '/v1/runtime/plugins/plg_media/settings';
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

const withAccountLockHeld = (during: (release: () => Promise<void>) => Promise<void>): Promise<void> => withSettingsLockHeld(db, pete.accountId, during);
const someoneWaitsOnTheLock = () => waitFor(async () => (await advisoryLockWaiters(db)) > 0 || undefined, 'the write to wait on the account lock');

test('an activation does not wait for a write still waiting for its locks; that write is then refused 409 runtime_session_superseded', async () => {
  const a = await (await pete.runtime(world)).open();
  const before = await read(a);
  let write!: Promise<Response>;
  let b!: RuntimeClient;
  await withAccountLockHeld(async (release) => {
    write = a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.3 } }, headers: { 'if-match': before.etag } });
    await someoneWaitsOnTheLock();
    const started = Date.now();
    b = await (await pete.runtime(world)).open();
    assert.ok(Date.now() - started < 3_000, 'the activation answered while the write still waits');
    assert.is(await sessionState(a), 'superseded');
    assert.equal((await read(b)).resolved, DEFAULTS);
    await release();
  });
  await assertProblem(await write, 409, 'runtime_session_superseded');
  assert.equal((await read(b)).resolved, DEFAULTS, 'nothing written by a page that lost the lease before its turn');
});

test('an activation waits for a write that holds the turn (its fence checked), and the new holder reads what it wrote', async () => {
  const a = await (await pete.runtime(world)).open();
  const { etag } = await read(a);
  const { sessions } = await runtimeServices(server.services);
  const original = sessions.requireLease.bind(sessions);
  let checked!: () => void;
  const fenceChecked = new Promise<void>((resolve) => (checked = resolve));
  let resume!: () => void;
  const resumed = new Promise<void>((resolve) => (resume = resolve));
  let checks = 0;
  // The write's check in its turn passes, then the write pauses there (a slow statement, a GC pause).
  sessions.requireLease = async (caller, sessionId, lease) => {
    const state = await original(caller, sessionId, lease);
    if (sessionId === a.sessionId && ++checks === 2) {
      checked();
      await resumed;
    }
    return state;
  };
  let opened = false;
  let opening!: Promise<RuntimeClient>;
  let write!: Promise<Response>;
  try {
    write = a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.3 } }, headers: { 'if-match': etag } });
    await fenceChecked;
    opening = pete.runtime(world).then((b) => b.open()).then((b) => ((opened = true), b));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.is(opened, false, 'the activation waits for the write holding the turn');
  } finally {
    resume();
    sessions.requireLease = original;
  }
  assert.is((await write).status, 200);
  const b = await opening;
  assert.is(await sessionState(a), 'superseded');
  assert.equal((await read(b)).resolved, { ...DEFAULTS, volume: 0.3 }, 'the new holder reads after the write');
});

test('a write whose turn comes after an activation is refused 409 runtime_session_superseded, and writes nothing', async () => {
  const a = await (await pete.runtime(world)).open();
  const before = await read(a);
  const b = await pete.runtime(world);
  assert.is((await b.createSession()).status, 201);
  // B's activation takes the person's turn and is held just before it moves the lease; A's write passes its
  // request's fence (A still holds the lease) and waits for the turn.
  let gate!: () => void;
  const held = new Promise<void>((resolve) => (gate = resolve));
  let holding = false;
  const restore = interceptSends(server.services.host, async (kind, _key, event, next) => {
    if (kind === 'runtime-lease' && event.type === 'lease.acquire' && event.sessionId === b.sessionId) {
      holding = true;
      await held;
    }
    return next();
  });
  let write!: Promise<Response>;
  try {
    const activating = b.activate();
    await waitFor(() => holding || undefined, "B's activation to hold the turn");
    write = a.fenced(MEDIA, { method: 'PUT', body: { layer: 'user', settings: { volume: 0.2 } }, headers: { 'if-match': before.etag } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    gate();
    assert.is((await activating).status, 200);
  } finally {
    gate();
    restore();
  }
  await assertProblem(await write, 409, 'runtime_session_superseded');
  assert.equal(await read(b), before, 'nothing written by a page that lost the lease before its turn');
});

test('an outage while the fence is checked in the write\'s turn answers 503 runtime_coordination_unavailable, and writes nothing', async () => {
  const page = await (await pete.runtime(world)).open();
  const before = await read(page);
  const { sessions } = await runtimeServices(server.services);
  const original = sessions.requireLease.bind(sessions);
  let checks = 0;
  // The credential check passes; the one in the write's turn meets the outage.
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
