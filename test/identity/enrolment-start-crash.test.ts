import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { DeviceClient } from '../../client/device-client.js';
import { ENROLMENT_TTL_MS } from '../../identity/accounts.js';
import { newId } from '../../identity/ids.js';
import { productParts } from '../../server/main.js';
import { assertProblem, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * `POST /v1/enrol/start` for a new handle reserves the handle for a fresh account id, then opens that account: two
 * actors, two commits. A start that crashed (or failed on a storage error) between them left the handle reserved for
 * an account that was never opened, which no later start could take over (only an abandoned account's reservation
 * is), so the handle was refused `409 handle_unavailable` for the reservation's whole 70 minutes. A holder never
 * opened a while after its reservation can no longer be a start under way: it is abandoned and the handle taken over.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
const lifecycle = withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);
const RESERVATION_MARGIN_MS = 60 * 60_000;

async function timedDevice(name: string): Promise<DeviceClient> {
  const device = await DeviceClient.generate(name);
  device.now = () => clock.now();
  return device;
}

function enrolStart(handle: string, device: DeviceClient): Promise<Response> {
  return fetch(`${server.url}/v1/enrol/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handle, device: { name: device.name, publicKey: device.publicJwk } }),
  });
}

/** What a start's first step leaves when the process dies before the second: the handle reserved for a fresh account id. */
async function reserveForUnopenedAccount(handle: string): Promise<string> {
  const accountId = newId('acc');
  const reply = await server.services.host.send('account-handle', handle, {
    type: 'handle.reserve',
    accountId,
    expiresAt: clock.now() + ENROLMENT_TTL_MS + RESERVATION_MARGIN_MS,
  });
  assert.is((reply.emitted[0] as { type: string }).type, 'handle.reserved');
  return accountId;
}

test('a start in flight keeps its handle: a reservation just made for an account not opened yet is not taken over', async () => {
  await reserveForUnopenedAccount('racing');
  await assertProblem(await enrolStart('racing', await timedDevice('second')), 409, 'handle_unavailable');
});

test('a start that died between reserving the handle and opening its account: after a restart the handle enrols again', async () => {
  const orphan = await reserveForUnopenedAccount('orphaned');
  await lifecycle.restart();
  // The restart takes a while in real life; the clock stands still here, so it is moved past the start's time.
  clock.advance(2 * 60_000);
  const device = await timedDevice('retry');
  const started = await startEnrolment(server.url, 'orphaned', device);
  assert.is(started.proof, 'possession', 'a new account holds the handle');
  const completed = await device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });
  assert.is(completed.status, 201, await completed.clone().text());
  // Had the old start been alive after all, its open comes too late: the account it names was abandoned first.
  const late = await server.services.host.send('account', orphan, { type: 'account.open', handle: 'orphaned', enrolment: {} });
  assert.equal([late.emitted, late.snapshot.value], [[], 'abandoned']);
});

test('a start whose answer was lost (committed, then the crash): the same device key starting again after a restart takes the handle over', async () => {
  const device = await timedDevice('lost answer');
  const lost = await startEnrolment(server.url, 'lostanswer', device);
  await lifecycle.restart();
  const again = await startEnrolment(server.url, 'lostanswer', device);
  assert.is(again.proof, 'possession');
  assert.is.not(again.enrolmentId, lost.enrolmentId);
  const completed = await device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: again.enrolmentId, nonce: again.nonce }, { bindBody: true });
  assert.is(completed.status, 201, await completed.clone().text());
});

test('another device key still cannot take a handle over while its first enrolment runs', async () => {
  await startEnrolment(server.url, 'pending', await timedDevice('first'));
  await assertProblem(await enrolStart('pending', await timedDevice('stranger')), 409, 'handle_unavailable');
});

test.run();
