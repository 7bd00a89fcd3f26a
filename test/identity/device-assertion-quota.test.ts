import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Each device's share of the replay guard, through the public API: a device past it is refused with 429
 * `device_assertion_quota_exceeded` and a Retry-After, and only that device (DEVICE_ASSERTIONS_PER_DEVICE, small here).
 */
const SHARE = 10;
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), productParts, { DEVICE_ASSERTIONS_PER_DEVICE: String(SHARE) });

test('a device past its share of remembered assertion ids is refused 429 with Retry-After; another device is served', async () => {
  const busy = await enrolFirst(server.url, 'busy-bea');
  const calm = await enrolFirst(server.url, 'calm-cal');
  // Enrolment itself used some of busy's share; spend the rest, then one more.
  let refused: Response | undefined;
  for (let i = 0; i <= SHARE && !refused; i++) {
    const res = await busy.device.request(server.url, 'GET', '/v1/account/devices');
    if (res.status !== 200) refused = res;
  }
  assert.ok(refused, `the device was never refused within ${SHARE + 1} requests`);
  const retryAfter = Number(refused.headers.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= 120, `Retry-After ${refused.headers.get('retry-after')}`);
  await assertProblem(refused, 429, 'device_assertion_quota_exceeded');
  assert.is((await calm.device.request(server.url, 'GET', '/v1/account/devices')).status, 200, 'another device is not charged for it');
});

test.run();
