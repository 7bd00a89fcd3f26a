import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { enrolAnother, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A further device joins an account only when an enrolled device admits it, so the only active device may not end
 * its enrolment (sign-out or removal): the account and its handle would otherwise be unreachable for good.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

test('the only device cannot sign out or remove itself (409 last_device); with a second device both work', async () => {
  const { device } = await enrolFirst(server.url, 'solo');
  for (const refused of [
    await device.request(server.url, 'POST', '/v1/account/sign-out'),
    await device.request(server.url, 'DELETE', `/v1/account/devices/${device.deviceId}`),
  ]) {
    assert.is(refused.status, 409);
    assert.is(((await refused.json()) as { code: string }).code, 'last_device');
  }
  assert.is((await device.request(server.url, 'GET', '/v1/account/devices')).status, 200, 'still enrolled');

  const phone = await enrolAnother(server.url, 'solo', device, 'solo phone');
  assert.is((await device.request(server.url, 'POST', '/v1/account/sign-out')).status, 204, 'another device remains');
  assert.is((await device.request(server.url, 'GET', '/v1/account/devices')).status, 401, 'signed out: its enrolment ended');
  const last = await phone.request(server.url, 'DELETE', `/v1/account/devices/${phone.deviceId}`);
  assert.is(last.status, 409, 'and now the phone is the last one');
});

test.run();
