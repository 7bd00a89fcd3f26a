import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import type { RuntimeSessions } from '../../runtime/runtime-sessions.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A runtime socket admitted with the current lease while its session ends: released by its page, or revoked by a
 * browser logout. The end lands after the fence check but before the socket subscribed to its session's activity, so
 * the socket hears it only from the check at its opening. It must hear what an open socket hears for that end (the
 * docs/decisions.md: "a socket whose lease moved while it was being admitted hears the same as soon as it opens"), not `lapsed`.
 */
let server: TestServer;
let env: TestEnvironment;

withTestServer(test, (started) => ({ server } = started), productParts, { ...LONG_LEASE_ENV });
let kai: RuntimePerson;
let mia: RuntimePerson;
test.before(async () => {
  kai = await runtimePerson(server, 'kai-ae');
  mia = await runtimePerson(server, 'mia-ae');
  env = await testEnvironment(server.opsUrl, 'admission-end', 'kai-ae');
});

/** Opens `page`'s runtime socket with `during` run inside its upgrade, right after the fence check passed. */
async function socketWithEndDuringUpgrade(sessions: RuntimeSessions, sessionId: string, open: () => Promise<Socket>, during: () => Promise<void>): Promise<Socket> {
  const original = sessions.requireLease.bind(sessions);
  let done = false;
  sessions.requireLease = async (caller, id, lease) => {
    const state = await original(caller, id, lease);
    if (id === sessionId && !done) {
      done = true;
      await during();
    }
    return state;
  };
  try {
    return await open();
  } finally {
    sessions.requireLease = original;
  }
}

const closedWithin = (socket: Socket, ms: number) =>
  Promise.race([socket.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), ms))]);

test('a session released during its socket upgrade: the socket hears lease.ended released and closes 4410', async () => {
  const page = await (await kai.runtime(env)).open();
  const { sessions } = await runtimeServices(server.services);
  const socket = await socketWithEndDuringUpgrade(sessions, page.sessionId!, () => runtimeSocket(page), async () => {
    const released = await page.release();
    assert.is(released.status, 200);
  });
  assert.is(await sessionState(page), 'ended');
  const closed = await closedWithin(socket, 2000);
  assert.is.not(closed, 'open');
  assert.equal(socket.messages.filter((m) => m.type === 'lease.ended'), [{ type: 'lease.ended', reason: 'released' }], JSON.stringify(socket.messages));
  assert.is((closed as { code: number }).code, 4410);
});

test('a session revoked by a browser logout during its socket upgrade: the socket hears lease.ended revoked and closes 4401', async () => {
  const page = await (await mia.runtime(env)).open();
  const { sessions } = await runtimeServices(server.services);
  const socket = await socketWithEndDuringUpgrade(sessions, page.sessionId!, () => runtimeSocket(page), async () => {
    const out = await logoutBrowser(server.url, mia);
    assert.ok(out.status < 300, `logout: ${out.status}`);
  });
  const closed = await closedWithin(socket, 2000);
  assert.is.not(closed, 'open');
  assert.equal(socket.messages.filter((m) => m.type === 'lease.ended'), [{ type: 'lease.ended', reason: 'revoked' }], JSON.stringify(socket.messages));
  assert.is((closed as { code: number }).code, 4401);
});

test.run();
