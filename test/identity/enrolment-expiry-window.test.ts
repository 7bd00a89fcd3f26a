import { test } from 'uvu';
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

test.run();
