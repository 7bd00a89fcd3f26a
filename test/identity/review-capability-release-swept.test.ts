import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { DeviceClient } from '../../client/device-client.js';
import { AccessRecordSweep } from '../../identity/access-sweep.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { assertProblem, enrolAnother, enrolFirst, makeReviewer } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Releasing a review host capability answers 204 "released or already revoked" (the spec's table), also once the
 * access sweep has removed it, a day after it ended: the release is idempotent, and a review host that releases late
 * (a laptop woken the next day) must not be told its device proof failed.
 */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);

const DAY_MS = 24 * 3600_000;
let sana: DeviceClient;
let theo: DeviceClient;
// Enrolled before any test moves the clock: an enrolment signs on the real one.
test.before(async () => {
  sana = await reviewer('sana');
  theo = await reviewer('theo');
});

/** A reviewer's device on the test's clock. */
async function reviewer(handle: string): Promise<DeviceClient> {
  const { device, accountId } = await enrolFirst(server.url, handle);
  device.now = () => clock.now();
  await makeReviewer(server, handle, device, accountId);
  return device;
}

async function issue(device: DeviceClient): Promise<{ capabilityId: string; capability: string }> {
  const res = await device.request(server.url, 'POST', '/v1/review/host-capabilities', {});
  assert.is(res.status, 201, await res.clone().text());
  return (await res.json()) as { capabilityId: string; capability: string };
}

const release = (device: DeviceClient, capabilityId: string, capability: string, bindBody = true): Promise<Response> =>
  device.request(server.url, 'DELETE', `/v1/review/host-capabilities/${capabilityId}`, undefined, { bindBody, headers: { 'platform-review-capability': capability } });

async function sweptAfterADay(ids: readonly string[]): Promise<void> {
  clock.advance(DAY_MS + 60 * 60_000);
  await new AccessRecordSweep(db.connection.db).run(clock.now());
  const left = await db.connection.db.selectFrom('review_host_capabilities').select('id').where('id', 'in', ids).execute();
  assert.equal(left, [], 'the sweep removed them');
}

test('a capability released, or left to expire, answers 204 to a release once the sweep removed it', async () => {
  const device = sana;
  const released = await issue(device);
  const expired = await issue(device);
  assert.is((await release(device, released.capabilityId, released.capability)).status, 204);
  await sweptAfterADay([released.capabilityId, expired.capabilityId]);

  const again = await release(device, released.capabilityId, released.capability);
  assert.is(again.status, 204, await again.clone().text());
  const late = await release(device, expired.capabilityId, expired.capability);
  assert.is(late.status, 204, await late.clone().text());
});

test('the device proof is still required, and a capability the registry still holds is still checked', async () => {
  const device = theo;
  const gone = await issue(device);
  await sweptAfterADay([gone.capabilityId]);
  // Without the body-bound proof, or with no such form of capability, nothing is answered as released.
  await assertProblem(await release(device, gone.capabilityId, gone.capability, false), 401, 'device_assertion_body_mismatch');
  await assertProblem(await release(device, gone.capabilityId, 'rhc_forged'), 401, 'review_capability_invalid');
  // Another device of the account may not release a capability the registry holds for this one, live or ended.
  const live = await issue(device);
  const other = await enrolAnother(server.url, 'theo', device, 'theo desktop');
  await assertProblem(await release(other, live.capabilityId, live.capability), 401, 'review_capability_invalid');
  // Nor name another capability in the path than the one it sends.
  const second = await issue(device);
  await assertProblem(await release(device, second.capabilityId, live.capability), 403, 'review_capability_mismatch');
  assert.is((await release(device, live.capabilityId, live.capability)).status, 204);
  const row = await db.connection.db.selectFrom('review_host_capabilities').select('revoked_at').where('id', '=', live.capabilityId).executeTakeFirstOrThrow();
  assert.ok(row.revoked_at, 'the live one was released');
  const untouched = await db.connection.db.selectFrom('review_host_capabilities').select('revoked_at').where('id', '=', second.capabilityId).executeTakeFirstOrThrow();
  assert.is(untouched.revoked_at, null);
});

test.run();
