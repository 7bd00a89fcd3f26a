import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { assertProblem } from '../support/identity.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * Browser SSO logout racing the creation of a Runtime session in that browser. The logout looks for the browser's
 * sessions once, and a creation under way may commit after that look: it then finds the logout (recorded first) and
 * revokes the session it made. Either way no session of the browser outlives the logout.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let env: TestEnvironment;
let lea: RuntimePerson;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, LONG_LEASE_ENV);
  lea = await runtimePerson(server, 'lea');
  env = await testEnvironment(server.opsUrl, 'leas-world', 'lea');
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

type Host = { send: (kind: string, key: string, event: { type: string }) => Promise<unknown> };

test('a session whose creation overlaps the browser logout is revoked: the creation answers 401, the session reads ended', async () => {
  const page = await lea.runtime(env);
  const host = server.services.host as unknown as Host;
  const original = host.send;
  let arrived!: (sessionId: string) => void;
  const createArrived = new Promise<string>((resolve) => (arrived = resolve));
  let release!: () => void;
  const logoutDone = new Promise<void>((resolve) => (release = resolve));
  // The creation has passed its token check and written its browser index row; its session.create is held until the
  // logout has run (the window is the time between the index row and the session actor's commit).
  host.send = function (this: unknown, kind, key, event) {
    if (kind === 'runtime-session' && event.type === 'session.create') {
      arrived(key);
      return logoutDone.then(() => original.call(this, kind, key, event));
    }
    return original.call(this, kind, key, event);
  };
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
    host.send = original;
  }
  await assertProblem(created, 401, 'runtime_authorization_expired');

  // Signed in again in the same browser, the page's session from before the logout is ended, and cannot be activated.
  assert.is((await lea.browser.openPageSession()).status, 204);
  const again = new RuntimeClient(server.url, await lea.token(env), env.origin);
  again.sessionId = sessionId;
  assert.is(await sessionState(again), 'ended');
  await assertProblem(await again.activate(), 409, 'runtime_session_ended');
});

test.run();
