import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DeviceClient } from '../../client/device-client.js';
import { ENROLMENT_TTL_MS } from '../../identity/accounts.js';
import { productParts } from '../../server/main.js';
import { assertProblem, startEnrolment } from '../support/identity.js';
import { LaggingClock } from '../support/lagging-clock.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A first device's enrolment expires at its deadline, not when its timer is delivered: completed in between, it
 * answers as an expired one does (404 `enrolment_not_found`), with the right proof or a wrong one, never 403 as if
 * the proof were what failed. The lagging clock (what the test is about) holds that window open.
 */
const clock = new LaggingClock();
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts, { ACTOR_TIMER_POLL_MS: '3600000' }, clock);

test('completing a first enrolment past its deadline, before its timer: 404 enrolment_not_found, right proof or wrong', async () => {
  const device = await DeviceClient.generate('late');
  device.now = () => clock.now();
  const started = await startEnrolment(server.url, 'latecomer', device);
  clock.lag += ENROLMENT_TTL_MS + 1;
  const complete = (nonce: string): Promise<Response> =>
    device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce }, { bindBody: true });
  await assertProblem(await complete(started.nonce!), 404, 'enrolment_not_found');
  await assertProblem(await complete('A'.repeat(started.nonce!.length)), 404, 'enrolment_not_found');
});

test('a handle whose reservation lapsed, before its timer: another person\'s enrolment may take it', async () => {
  const first = await DeviceClient.generate('first');
  first.now = () => clock.now();
  await startEnrolment(server.url, 'contested', first);
  // Well past the reservation (the enrolment's lifetime plus the margin the registry keeps for its completion).
  clock.lag += 3 * 60 * 60_000;
  const second = await DeviceClient.generate('second');
  second.now = () => clock.now();
  await startEnrolment(server.url, 'contested', second);
});

test('the person whose first enrolment lapsed starts again with the same handle at once, before their timer', async () => {
  const first = await DeviceClient.generate('first try');
  first.now = () => clock.now();
  const lapsed = await startEnrolment(server.url, 'lapsed', first);
  // Past the enrolment, well inside the hour the reservation keeps beyond it for a completed enrolment's bind: this
  // account never completed, so nothing needs that hour, and the person was told 409 handle_unavailable for it.
  clock.lag += ENROLMENT_TTL_MS + 1;
  const second = await DeviceClient.generate('second try');
  second.now = () => clock.now();
  const started = await startEnrolment(server.url, 'lapsed', second);
  assert.is(started.proof, 'possession', 'a new account takes the handle');
  const done = await second.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });
  assert.is(done.status, 201, await done.clone().text());
  assert.is(((await done.json()) as { handle: string }).handle, 'lapsed');
  // The lapsed account stays ended: its device's late completion does not take the handle back.
  const late = await first.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: lapsed.enrolmentId, nonce: lapsed.nonce }, { bindBody: true });
  assert.ok(late.status === 401 || late.status === 404, `got ${late.status}`);
  const stranger = await DeviceClient.generate('stranger');
  stranger.now = () => clock.now();
  assert.is((await startEnrolment(server.url, 'lapsed', stranger)).proof, 'approval', 'the handle is bound to the new account');
});

test('a first enrolment still inside its lifetime keeps its handle from a new one', async () => {
  const first = await DeviceClient.generate('in time');
  first.now = () => clock.now();
  await startEnrolment(server.url, 'intime', first);
  clock.lag += ENROLMENT_TTL_MS - 60_000;
  const other = await DeviceClient.generate('other');
  const res = await fetch(`${server.url}/v1/enrol/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handle: 'intime', device: { name: 'x', publicKey: other.publicJwk } }),
  });
  await assertProblem(res, 409, 'handle_unavailable');
});

test.run();
