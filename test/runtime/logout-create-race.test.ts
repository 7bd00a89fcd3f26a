import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, tokenRequest } from '../../client/oidc-client.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { interceptSends } from '../support/host.js';
import { assertProblem } from '../support/identity.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Browser SSO logout racing the creation of a Runtime session in that browser. The logout looks for the browser's
 * sessions, ends its page sessions and grants, and looks again; a creation checks its sign-in once its session exists.
 * Whatever the interleaving, one of them sees the other, and no session of the browser outlives the logout.
 */
let db: TestDatabase;
let server: TestServer;
let env: TestEnvironment;
let lea: RuntimePerson;

withTestServer(test, (started) => ({ db, server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  lea = await runtimePerson(server, 'lea');
  env = await testEnvironment(server.opsUrl, 'leas-world', 'lea');
});

test('a session whose creation overlaps the browser logout is revoked: the creation answers 401, the session reads ended', async () => {
  const page = await lea.runtime(env);
  let arrived!: (sessionId: string) => void;
  const createArrived = new Promise<string>((resolve) => (arrived = resolve));
  let release!: () => void;
  const logoutDone = new Promise<void>((resolve) => (release = resolve));
  // The creation has passed its token check and written its browser index row; its session.create is held until the
  // logout has run (the window is the time between the index row and the session actor's commit).
  const restore = interceptSends(server.services.host, (kind, key, event, next) => {
    if (kind === 'runtime-session' && event.type === 'session.create') {
      arrived(key);
      return logoutDone.then(() => next());
    }
    return next();
  });
  let created: Response;
  let sessionId: string;
  try {
    const creating = page.createSession();
    sessionId = await createArrived;
    const out = await logoutBrowser(server.url, lea);
    assert.ok(out.status < 300, `logout ${out.status}`);
    release();
    created = await creating;
  } finally {
    restore();
  }
  await assertProblem(created, 401, 'runtime_authorization_expired');

  // Signed in again in the same browser, the page's session from before the logout is ended, and cannot be activated.
  assert.is((await lea.browser.openPageSession()).status, 204);
  const again = new RuntimeClient(server.url, await lea.token(env), env.origin);
  again.sessionId = sessionId;
  assert.is(await sessionState(again), 'ended');
  await assertProblem(await again.activate(), 409, 'runtime_session_ended');
});

test('a sign-in made and used while the logout runs (its first look over) leaves no Runtime session alive: the second look finds it', async () => {
  // A Runtime session the logout will find: its revocation is where the logout is held (after it looked).
  const before = await lea.runtime(env);
  assert.is((await before.createSession()).status, 201);
  // A code authorized before the logout (the person agreed once already).
  const { verifier, challenge } = pkcePair();
  const { location } = await lea.browser.authorize(authorizationUrl(server.url, { clientId: env.clientId, redirectUri: env.redirectUri, challenge }));
  const code = location!.searchParams.get('code')!;
  assert.ok(code);

  let looked!: () => void;
  const logoutLooked = new Promise<void>((resolve) => (looked = resolve));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let holding = true;
  const restore = interceptSends(server.services.host, (kind, _key, event, next) => {
    // Only the logout's first revocation is held (a fixed creation that revokes its own session must not wait).
    if (holding && kind === 'runtime-lease' && event.type === 'lease.release') {
      holding = false;
      looked();
      return held.then(() => next());
    }
    return next();
  });
  let during: RuntimeClient;
  let created: Response;
  try {
    const loggingOut = logoutBrowser(server.url, lea);
    await logoutLooked;
    await new Promise((r) => setTimeout(r, 5));
    const exchanged = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: env.clientId, code, redirect_uri: env.redirectUri, code_verifier: verifier });
    assert.is(exchanged.status, 200, 'the page session is not revoked yet: the exchange goes through');
    during = new RuntimeClient(server.url, String(exchanged.body.access_token), env.origin);
    created = await during.createSession();
    release();
    assert.is((await loggingOut).status, 200);
  } finally {
    release();
    restore();
  }
  // The grant is revoked by the logout.
  assert.is((await new RuntimeClient(server.url, during.accessToken, env.origin).createSession()).status, 401);

  // Signed in again in the same browser: the session created during the logout must be ended.
  assert.is((await lea.browser.openPageSession()).status, 204);
  const again = new RuntimeClient(server.url, await lea.token(env), env.origin);
  again.sessionId = during.sessionId;
  const state = await sessionState(again);
  assert.is(state, 'ended', `created during the logout (${created.status}), the session is ${state} after it and a new sign-in can use it`);
});

test('a creation however slow (its index row two minutes old) overlapping a logout leaves no live session behind', async () => {
  const page = await lea.runtime(env);
  let arrived!: (sessionId: string) => void;
  const createArrived = new Promise<string>((resolve) => (arrived = resolve));
  let releaseCreate!: () => void;
  const createHeld = new Promise<void>((resolve) => (releaseCreate = resolve));
  const restore = interceptSends(server.services.host, (kind, key, event, next) => {
    if (kind === 'runtime-session' && event.type === 'session.create') {
      arrived(key);
      return createHeld.then(() => next());
    }
    return next();
  });
  let releaseLock!: () => void;
  const lockHeld = new Promise<void>((resolve) => (releaseLock = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  let lockTx: Promise<void> | undefined;
  try {
    const creating = page.createSession();
    const sessionId = await createArrived;
    // The creation has been running for over a minute (its index row says so).
    await sql`UPDATE runtime_session_browsers SET created_at = now() - interval '2 minutes' WHERE session_id = ${sessionId}`.execute(db.connection.db);
    // Hold the logout between its first look and its grant revocation (its transaction locks the page sessions first).
    lockTx = db.connection.db.transaction().execute(async (trx) => {
      await sql`SELECT id FROM browser_sessions WHERE revoked_at IS NULL FOR UPDATE`.execute(trx);
      locked();
      await lockHeld;
    });
    await lockTaken;
    const loggingOut = logoutBrowser(server.url, lea);
    // The logout's first look is over once its transaction waits for the page sessions' row locks.
    const logoutWaiting = async () =>
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%browser_sessions%for update%'`.execute(db.connection.db)).rows[0]!.n > 0;
    await waitFor(logoutWaiting, 'the logout to have looked once and to wait on the page sessions');
    // The slow creation now finishes: its session commits and its sign-in is still live.
    releaseCreate();
    const created = await creating;
    releaseLock();
    await lockTx;
    assert.is((await loggingOut).status, 200);
    assert.is(created.status, 201, 'the creation finished before the grant was revoked');

    assert.is((await lea.browser.openPageSession()).status, 204);
    const again = new RuntimeClient(server.url, await lea.token(env), env.origin);
    again.sessionId = sessionId;
    assert.is(await sessionState(again), 'ended', 'a Runtime session of the browser outlived its logout');
  } finally {
    releaseCreate();
    releaseLock();
    await lockTx?.catch(() => {});
    restore();
  }
});

test.run();
