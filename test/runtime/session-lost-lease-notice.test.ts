import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RUNTIME_LEASE_KIND, RUNTIME_SESSION_KIND } from '../../actors/runtime.actors.js';
import { productParts } from '../../server/main.js';
import { runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A session hears that it lost the lease from the lease actor after that actor's commit (an effect, at most once), and
 * a release frees the lease before it ends the session. A crash between the two left the session's own record active
 * for good: no idle deadline, never ended, never retired. An active session now asks the lease actor every idle
 * period whether it still holds the lease (a durable deadline), so such a session idles out like any other.
 */
const clock = new ManualClock(Date.now());
const IDLE_S = 120;
let server: TestServer;
let env: TestEnvironment;
let kim: RuntimePerson;
let lee: RuntimePerson;

// The test that restarts the server runs last: people's browsers know the first server's address.

const lifecycle = withTestServer(
  test,
  (started) => ({ server } = started),
  productParts,
  // Leases that never lapse here: only the lost notice can take the lease from a session.
  { RUNTIME_SESSION_IDLE_SECONDS: String(IDLE_S), RUNTIME_LEASE_TTL_SECONDS: '3600', RUNTIME_EVICTIONS_PER_MINUTE: '1000' },
  clock,
);
test.before(async () => {
  kim = await runtimePerson(server, 'kim');
  lee = await runtimePerson(server, 'lee');
  env = await testEnvironment(server.opsUrl, 'notice-world', 'kim');
});

/** The session actor's own record (not the combined view a read answers), as the store holds it. */
async function ownRecord(sessionId: string): Promise<string> {
  const view = await server.services.host.readCommitted(RUNTIME_SESSION_KIND, sessionId);
  return String((view?.state as { value?: unknown } | undefined)?.value);
}

/** Moves the clock a step at a time until the session's own record is `wanted` (each step lets the server work). */
async function advanceUntil(sessionId: string, wanted: string, totalMs: number): Promise<void> {
  const step = 10_000;
  for (let moved = 0; moved <= totalMs; moved += step) {
    if ((await ownRecord(sessionId)) === wanted) return;
    clock.advance(step);
    await new Promise((r) => setTimeout(r, 30));
  }
  await waitFor(async () => (await ownRecord(sessionId)) === wanted, `the session's own record to be ${wanted} (it is ${await ownRecord(sessionId)})`);
}

test('an active session that still holds the lease stays active however long it lives', async () => {
  const page = await (await lee.runtime(env)).open();
  const sessionId = page.sessionId!;
  for (let i = 0; i < 3; i++) {
    clock.advance(IDLE_S * 1000 + 1_000);
    await new Promise((r) => setTimeout(r, 200));
  }
  await waitFor(async () => (await ownRecord(sessionId)) === 'active', 'the session to stay active');
  assert.is(await sessionState(page), 'active');
  assert.is((await page.fenced('/v1/runtime/plugins/plg_media/settings')).status === 409, false, 'its fence still holds');
});

test('a release that freed the lease and then crashed before ending the session: after a restart the session still ends', async () => {
  const page = await (await kim.runtime(env)).open();
  const sessionId = page.sessionId!;
  // The release's first step, which the crash let through: the lease actor freed the lease and recorded the end.
  await server.services.host.send(RUNTIME_LEASE_KIND, kim.accountId, { type: 'lease.release', sessionId });
  await lifecycle.restart();
  assert.is(await ownRecord(sessionId), 'active', 'what the crash left: the session record still says active');
  // Two idle periods at most: one until the session asks the lease, one idle deadline after it learns.
  await advanceUntil(sessionId, 'released', 2 * IDLE_S * 1000 + 30_000);
  const view = await server.services.host.readCommitted(RUNTIME_SESSION_KIND, sessionId);
  const context = (view!.state as { context: { endedAt: number | null; endedReason: string | null } }).context;
  assert.ok(context.endedAt !== null, 'ended, so it is retired in time');
  assert.is(context.endedReason, 'idle_expired');
});

test.run();
