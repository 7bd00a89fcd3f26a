import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { assertProblem } from '../support/identity.js';
import { LaggingClock } from '../support/lagging-clock.js';
import { runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A lease lapses at its deadline, not when its timer is delivered: a passivated lease actor's timer is found by a poll
 * and an outage delays it longer. The lagging clock (what the test is about) holds that window open.
 */
const LEASE_TTL_MS = 30_000;
const clock = new LaggingClock();
let server: TestServer;
let env: TestEnvironment;
let kim: RuntimePerson;

// No poll for due timers during the test: nothing but the clock's own timers would deliver the lapse.
withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_MS / 1000), ACTOR_TIMER_POLL_MS: '3600000' }, clock);
test.before(async () => {
  kim = await runtimePerson(server, 'kim');
  kim.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'kims-world', 'kim');
});

const fencedCall = (page: RuntimeClient): Promise<Response> => page.fenced('/v1/runtime/plugins/plg_media/settings');

test('past its deadline, before its timer is delivered: the lease fences nothing, reads standby, and a new activation gets a newer version', async () => {
  const page = await (await kim.runtime(env)).open();
  const before = page.lease!.leaseVersion;
  const held = await fencedCall(page);
  assert.is.not(held.status, 409, await held.text());
  clock.lag += LEASE_TTL_MS + 1;
  await assertProblem(await fencedCall(page), 409, 'runtime_session_standby');
  assert.is(await sessionState(page), 'standby');
  // The activation meets the lapse first: a new fence, never the lapsed one handed back.
  const activated = await page.activate();
  assert.is(activated.status, 200, await activated.text());
  assert.ok(page.lease!.leaseVersion > before, `version ${page.lease!.leaseVersion} after ${before}`);
  const again = await fencedCall(page);
  assert.is.not(again.status, 409, await again.text());
  await page.release();
});

test.run();
