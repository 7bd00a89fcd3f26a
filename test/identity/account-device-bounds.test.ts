import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DeviceClient } from '../../client/device-client.js';
import { MAX_ACTIVE_DEVICES, REMOVED_DEVICES_KEPT } from '../../machines/account/account.machine.js';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolFirst, startEnrolment } from '../support/identity.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Every device an account ever held lived in its state, which each write of the account stores again: one person
 * admitting key after key (or admitting and removing them) grew it without end. Now an account holds at most
 * MAX_ACTIVE_DEVICES active devices and remembers the newest REMOVED_DEVICES_KEPT removed ones, counted in the stored
 * state through the operator listener; the device actors of those it forgets end, to be retired.
 */
let server: TestServer;
let db: TestDatabase;
withTestServer(test, (started) => ({ server, db } = started), productParts);

/** Enrolment start allows a burst of 20 per client address: each run of 20 comes from another loopback address. */
let starts = 0;
const nextAddress = (): string => `127.0.0.${2 + Math.floor(starts++ / 20)}`;

interface Started {
  readonly device: DeviceClient;
  readonly enrolmentId: string;
  readonly nonce: string;
}

async function start(handle: string, name: string): Promise<Started> {
  const device = await DeviceClient.generate(name);
  const started = await startEnrolment(server.url, handle, device, nextAddress());
  return { device, enrolmentId: started.enrolmentId!, nonce: started.nonce! };
}

const approve = (admitter: DeviceClient, enrolment: Started): Promise<Response> =>
  admitter.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: enrolment.enrolmentId, decision: 'admit' });
const complete = (enrolment: Started): Promise<Response> =>
  enrolment.device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: enrolment.enrolmentId, nonce: enrolment.nonce }, { bindBody: true });

async function enrolAdmitted(handle: string, admitter: DeviceClient, name: string): Promise<DeviceClient> {
  const enrolment = await start(handle, name);
  assert.is((await approve(admitter, enrolment)).status, 204);
  const done = await complete(enrolment);
  assert.is(done.status, 201, await done.clone().text());
  return enrolment.device;
}

/** The account's devices as stored (the operator's inspection), by status. */
async function storedDevices(accountId: string): Promise<{ active: number; removed: string[] }> {
  const detail = (await (await fetch(`${server.opsUrl}/actors/account/${accountId}`)).json()) as {
    persisted: { snapshot: { context: { devices: Record<string, { id: string; status: string }> } } };
  };
  const devices = Object.values(detail.persisted.snapshot.context.devices);
  return { active: devices.filter((d) => d.status === 'active').length, removed: devices.filter((d) => d.status === 'removed').map((d) => d.id) };
}

test(`an account holds at most ${MAX_ACTIVE_DEVICES} active devices: admitting or completing another is 409 device_limit_reached until one goes`, async () => {
  const first = await enrolFirst(server.url, 'fleet', nextAddress());
  for (let i = 2; i < MAX_ACTIVE_DEVICES; i++) await enrolAdmitted('fleet', first.device, `fleet ${i}`);
  // One place left, two admitted while it was free: the first to complete takes it.
  const a = await start('fleet', 'fleet a');
  const b = await start('fleet', 'fleet b');
  assert.is((await approve(first.device, a)).status, 204);
  assert.is((await approve(first.device, b)).status, 204);
  assert.is((await complete(a)).status, 201);
  await assertProblem(await complete(b), 409, 'device_limit_reached');
  const c = await start('fleet', 'fleet c');
  await assertProblem(await approve(first.device, c), 409, 'device_limit_reached');
  assert.equal(await storedDevices(first.accountId), { active: MAX_ACTIVE_DEVICES, removed: [] });

  // A device removed frees the place (and, raising the epoch, ends the admission that waited): a new one joins.
  assert.is((await first.device.request(server.url, 'DELETE', `/v1/account/devices/${a.device.deviceId}`)).status, 200);
  await assertProblem(await complete(b), 401, 'device_unknown');
  await enrolAdmitted('fleet', first.device, 'fleet d');
  const listed = (await (await first.device.request(server.url, 'GET', '/v1/account/devices')).json()) as { devices: unknown[] };
  assert.is(listed.devices.length, MAX_ACTIVE_DEVICES);
});

test(`an account remembers its newest ${REMOVED_DEVICES_KEPT} removed devices: devices coming and going leave its state bounded`, async () => {
  const first = await enrolFirst(server.url, 'churn', nextAddress());
  const removed: DeviceClient[] = [];
  for (let i = 0; i < REMOVED_DEVICES_KEPT + 3; i++) {
    const device = await enrolAdmitted('churn', first.device, `churn ${i}`);
    assert.is((await first.device.request(server.url, 'DELETE', `/v1/account/devices/${device.deviceId}`)).status, 200);
    removed.push(device);
  }
  const stored = await storedDevices(first.accountId);
  assert.is(stored.active, 1);
  assert.equal(stored.removed.sort(), removed.slice(3).map((d) => d.deviceId!).sort(), 'the newest removals, the three oldest forgotten');
  // A forgotten device's own actor ends too (so it is retired in time), a remembered one's does not.
  const ended = await db.connection.db
    .selectFrom('actor_snapshots')
    .select('key')
    .where('kind', '=', 'device')
    .where('key', 'in', removed.map((d) => d.deviceId!))
    .where('ended_at', 'is not', null)
    .execute();
  assert.equal(ended.map((r) => r.key).sort(), removed.slice(0, 3).map((d) => d.deviceId!).sort());
  // Either way the device is refused: as removed while remembered, as unknown once forgotten.
  await assertProblem(await removed[0]!.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_unknown');
  await assertProblem(await removed.at(-1)!.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_removed');
});

test.run();
