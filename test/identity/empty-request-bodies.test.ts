import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { assertApiError, assertProblem, enrolAnother, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Operations whose request body the spec gives as none (or as an empty request) take a request without one: no bytes,
 * no Content-Type, with or without a device assertion whose digest covers that empty body. A body sent to one that
 * takes none is refused, as the route table says (`body_not_allowed`), and does nothing.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

/** A request signed by `device` that sends exactly `body` (none when undefined), its digest in the assertion or not. */
async function signed(device: DeviceClient, method: string, path: string, options: { body?: string; digest: boolean; headers?: Record<string, string> }): Promise<Response> {
  const assertion = await device.assertion({ method, target: path, bindBody: options.digest, ...(options.body === undefined ? {} : { body: options.body }) });
  return fetch(`${server.url}${path}`, {
    method,
    headers: { ...options.headers, 'platform-device-assertion': assertion, ...(options.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(options.body === undefined ? {} : { body: options.body }),
  });
}

async function desktopBearer(device: DeviceClient): Promise<{ sessionId: string; accessToken: string }> {
  const res = await signed(device, 'POST', '/v1/account/desktop-management-sessions', { digest: true });
  assert.is(res.status, 201, await res.clone().text());
  return (await res.json()) as { sessionId: string; accessToken: string };
}

test('device-plane operations that take no body accept none, with or without a digest of the empty body', async () => {
  const { device } = await enrolFirst(server.url, 'nola');
  for (const digest of [false, true]) {
    assert.is((await signed(device, 'POST', '/v1/account/page-session', { digest })).status, 204, `page session, digest ${digest}`);
    assert.is((await signed(device, 'POST', '/v1/account/devices/revoke-all', { digest })).status, 200, `revoke-all, digest ${digest}`);
    const other = await enrolAnother(server.url, 'nola', device, `spare ${digest}`);
    assert.is((await signed(device, 'DELETE', `/v1/account/devices/${other.deviceId}`, { digest })).status, 200, `device removal, digest ${digest}`);
    const { sessionId } = await desktopBearer(device);
    assert.is((await signed(device, 'DELETE', `/v1/account/desktop-management-sessions/${sessionId}`, { digest })).status, 200, `desktop session revocation, digest ${digest}`);
    const leaving = await enrolAnother(server.url, 'nola', device, `leaving ${digest}`);
    assert.is((await signed(leaving, 'POST', '/v1/account/sign-out', { digest })).status, 204, `sign-out, digest ${digest}`);
  }
  // A digest that covers some other body is still refused: the empty body is what it must cover.
  const wrong = await device.assertion({ method: 'POST', target: '/v1/account/page-session', bindBody: true, body: '{}' });
  await assertProblem(await fetch(`${server.url}/v1/account/page-session`, { method: 'POST', headers: { 'platform-device-assertion': wrong } }), 401, 'device_assertion_body_mismatch');
});

test('issuing a desktop management session or a review host capability needs no body; releasing the capability verifies a digest of the empty body', async () => {
  const { device, accountId } = await enrolFirst(server.url, 'oren');
  const admin = await fetch(`${server.opsUrl}/registry/accounts/oren/platform-admin`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops' },
    body: JSON.stringify({ reason: 'first administrator' }),
  });
  assert.is(admin.status, 200);
  // No body at all, body-bound: the digest covers the empty body.
  const { accessToken } = await desktopBearer(device);
  const granted = await fetch(`${server.url}/v1/admin/reviewer-authorities/${accountId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'review rota' }),
  });
  assert.is(granted.status, 200);

  const issued = await signed(device, 'POST', '/v1/review/host-capabilities', { digest: true });
  assert.is(issued.status, 201, await issued.clone().text());
  const { capabilityId, capability } = (await issued.json()) as { capabilityId: string; capability: string };
  // `{}` stays what it was; only an empty body was refused before.
  assert.is((await signed(device, 'POST', '/v1/review/host-capabilities', { digest: true, body: '{}' })).status, 201);
  await assertProblem(await signed(device, 'POST', '/v1/review/host-capabilities', { digest: false }), 401, 'device_assertion_body_mismatch');
  const released = await signed(device, 'DELETE', `/v1/review/host-capabilities/${capabilityId}`, { digest: true, headers: { 'platform-review-capability': capability } });
  assert.is(released.status, 204, await released.clone().text());
});

test('a body sent to an operation that takes none is refused and does nothing, whatever its digest', async () => {
  const { device } = await enrolFirst(server.url, 'pia');
  const other = await enrolAnother(server.url, 'pia', device, 'spare');
  for (const body of ['{}', '{"keep":"this one"}']) {
    await assertProblem(await signed(device, 'POST', '/v1/account/devices/revoke-all', { digest: true, body }), 400, 'body_not_allowed');
    await assertProblem(await signed(device, 'POST', '/v1/account/sign-out', { digest: false, body }), 400, 'body_not_allowed');
  }
  // Both devices are still enrolled: the refused revoke-all and sign-out changed nothing.
  const listed = await signed(other, 'GET', '/v1/account/devices', { digest: false });
  assert.is(listed.status, 200);
  const devices = ((await listed.json()) as { devices: Array<{ deviceId: string }> }).devices;
  assert.equal(devices.map((d) => d.deviceId).sort(), [device.deviceId, other.deviceId].sort());
});

test('management operations that take no body accept none and refuse one', async () => {
  const { device } = await enrolFirst(server.url, 'quin');
  const { accessToken } = await desktopBearer(device);
  const bearer = { authorization: `Bearer ${accessToken}` };
  const console = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { ...bearer, 'content-length': '0' } });
  assert.is(console.status, 200, await console.clone().text());
  const refused = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { ...bearer, 'content-type': 'application/json' }, body: '{"ttl":1}' });
  await assertProblem(refused, 400, 'body_not_allowed');
  const cookie = console.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const logout = await fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie } });
  assert.is(logout.status, 200, await logout.clone().text());
  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions/grt_${'0'.repeat(26)}`, { method: 'DELETE', headers: { ...bearer, 'content-type': 'application/json' }, body: '{}' }), 400, 'body_not_allowed');
});

test.run();
