import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { enrolAnother, enrolFirst, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * An enrolment admitted by a device, but not yet completed, is not a device of the account yet. Removing the
 * admitting device, or `revoke-all` from another one, must not leave a door open for it: otherwise a stolen device
 * admits a device of the thief's just before the owner signs it out, and the thief's device joins afterwards, under
 * the new epoch, with a passport.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);

const complete = (device: DeviceClient, started: Record<string, string>) =>
  device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });

test('revoke-all: a device admitted by a now signed-out device cannot complete its enrolment afterwards', async () => {
  const { device: owner } = await enrolFirst(server.url, 'hanna');
  const stolen = await enrolAnother(server.url, 'hanna', owner, 'hanna old laptop');
  // The thief, holding the stolen laptop, asks to join with a device of their own and admits it.
  const thief = await DeviceClient.generate('thief');
  const started = await startEnrolment(server.url, 'hanna', thief);
  assert.is((await stolen.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: started.enrolmentId, decision: 'admit' })).status, 204);
  // The owner notices and signs out every other machine.
  assert.is((await owner.request(server.url, 'POST', '/v1/account/devices/revoke-all')).status, 200);
  // Spec: revoke-all "signs out every other machine, keeps this one". The thief's device must not get in now.
  const late = await complete(thief, started);
  assert.ok(late.status >= 400, `the admitted device completed after revoke-all: ${late.status} ${await late.clone().text()}`);
  const devices = (await (await owner.request(server.url, 'GET', '/v1/account/devices')).json()) as { devices: Array<{ deviceId: string }> };
  assert.equal(devices.devices.map((d) => d.deviceId), [owner.deviceId], 'only the caller is left after revoke-all');
});

test('removing the admitting device: what it admitted and was not yet enrolled does not join afterwards', async () => {
  const { device: owner } = await enrolFirst(server.url, 'ingrid');
  const stolen = await enrolAnother(server.url, 'ingrid', owner, 'ingrid old laptop');
  const thief = await DeviceClient.generate('thief');
  const started = await startEnrolment(server.url, 'ingrid', thief);
  assert.is((await stolen.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: started.enrolmentId, decision: 'admit' })).status, 204);
  assert.is((await owner.request(server.url, 'DELETE', `/v1/account/devices/${stolen.deviceId!}`)).status, 200);
  const late = await complete(thief, started);
  assert.ok(late.status >= 400, `the device admitted by a removed device completed: ${late.status} ${await late.clone().text()}`);
});

test.run();
