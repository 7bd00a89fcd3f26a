import { test } from 'uvu';
import { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolAnother, enrolFirst, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Whether a device was removed or has not completed its enrolment is said only to that device: an assertion naming
 * a device id but not signed by its key is refused as invalid whatever the device's status, so someone who only
 * learnt a device id (it travels in every assertion's `kid`) cannot probe it.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

test('an assertion not signed by the named device does not reveal that the device was removed or is pending', async () => {
  const { device: laptop } = await enrolFirst(server.url, 'probed');
  const phone = await enrolAnother(server.url, 'probed', laptop, 'probed phone');
  const tablet = await DeviceClient.generate('probed tablet');
  await startEnrolment(server.url, 'probed', tablet);
  const removed = await laptop.request(server.url, 'DELETE', `/v1/account/devices/${phone.deviceId!}`);
  if (removed.status !== 200) throw new Error(await removed.text());

  const stranger = await DeviceClient.generate('stranger');
  const probe = async (deviceId: string) =>
    fetch(`${server.url}/v1/account/devices`, {
      headers: { 'platform-device-assertion': await stranger.assertion({ method: 'GET', target: '/v1/account/devices', deviceId }) },
    });
  await assertProblem(await probe(laptop.deviceId!), 401, 'device_assertion_invalid');
  await assertProblem(await probe(phone.deviceId!), 401, 'device_assertion_invalid');
  await assertProblem(await probe(tablet.deviceId!), 401, 'device_assertion_invalid');

  // The devices themselves are still told why.
  await assertProblem(await phone.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_removed');
  await assertProblem(await tablet.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_not_enrolled');
});

test.run();
