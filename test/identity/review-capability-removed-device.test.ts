import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolAnother, enrolFirst, makeReviewer } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The account's cap on live review host capabilities counts only those of devices still enrolled. A removed device's
 * capabilities can no longer be used (every use needs that device's assertion) nor released (the release too), so
 * counting them let a stolen laptop, filling the cap before its removal, lock its owner's review host out for the
 * capabilities' 15 minutes.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

test("a removed device's capabilities do not hold the account's places", async () => {
  const { device: owner, accountId } = await enrolFirst(server.url, 'vera');
  await makeReviewer(server, 'vera', owner, accountId);

  const stolen = await enrolAnother(server.url, 'vera', owner, 'stolen laptop');
  // The thief fills the cap (issuing all at once, as fast as the device allows), then the owner removes the laptop.
  const issued = await Promise.all(Array.from({ length: 24 }, () => stolen.request(server.url, 'POST', '/v1/review/host-capabilities', {})));
  assert.is(issued.filter((r) => r.status === 201).length, 20);
  assert.is((await owner.request(server.url, 'DELETE', `/v1/account/devices/${stolen.deviceId!}`)).status, 200);

  const mine = await owner.request(server.url, 'POST', '/v1/review/host-capabilities', {});
  assert.is(mine.status, 201, await mine.clone().text());
  // The cap still holds for the devices that remain.
  for (let i = 0; i < 19; i++) assert.is((await owner.request(server.url, 'POST', '/v1/review/host-capabilities', {})).status, 201);
  await assertProblem(await owner.request(server.url, 'POST', '/v1/review/host-capabilities', {}), 429, 'review_host_capability_quota_exceeded');
});

test.run();
