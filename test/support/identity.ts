import { request } from 'node:http';
import * as assert from 'uvu/assert';
import { DeviceClient } from '../../client/device-client.js';
import { jsonOf } from './http.js';

/** Enrols the first device of a new account through the public API; returns the device and its passport. */
export async function enrolFirst(baseUrl: string, handle: string, from?: string): Promise<{ device: DeviceClient; passport: string; accountId: string }> {
  const device = await DeviceClient.generate(`${handle} laptop`);
  const started = await startEnrolment(baseUrl, handle, device, from);
  const res = await device.request(baseUrl, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });
  assert.is(res.status, 201, await res.clone().text());
  const passport = ((await res.json()) as { passport: string }).passport;
  const claims = JSON.parse(Buffer.from(passport.split('.')[1]!, 'base64url').toString()) as { sub: string };
  return { device, passport, accountId: claims.sub };
}

/**
 * `from` is a loopback source address (127.0.0.2, …) for tests that enrol more people than enrolment start's limit
 * per client address admits from one address: the gateway takes the address from the socket, as it should.
 */
export async function startEnrolment(baseUrl: string, handle: string, device: DeviceClient, from?: string): Promise<Record<string, string>> {
  const { status, text } = await requestEnrolment(baseUrl, handle, device, from);
  assert.is(status, 201, text);
  const started = JSON.parse(text) as Record<string, string>;
  device.deviceId = started.deviceId;
  return started;
}

/** `POST /v1/enrol/start` as sent, whatever it answers (`from`: see startEnrolment). */
export function requestEnrolment(baseUrl: string, handle: string, device: DeviceClient, from?: string): Promise<{ status: number; text: string }> {
  const body = JSON.stringify({ handle, device: { name: device.name, publicKey: device.publicJwk } });
  return from === undefined ? postJson(`${baseUrl}/v1/enrol/start`, body) : postJsonFrom(from, `${baseUrl}/v1/enrol/start`, body);
}

async function postJson(url: string, body: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, text: await res.text() };
}

/** fetch cannot choose its source address without undici's Agent, so this one request goes through node:http. */
function postJsonFrom(localAddress: string, url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', localAddress, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Enrols a second device of an existing account, admitted by `admitter` (and on its clock); `from`: see startEnrolment. */
export async function enrolAnother(baseUrl: string, handle: string, admitter: DeviceClient, name: string, from?: string): Promise<DeviceClient> {
  const device = await DeviceClient.generate(name);
  device.now = admitter.now;
  const started = await startEnrolment(baseUrl, handle, device, from);
  const decided = await admitter.request(baseUrl, 'POST', '/v1/enrol/approve', { enrolmentId: started.enrolmentId, decision: 'admit' });
  assert.is(decided.status, 204, await decided.clone().text());
  const done = await device.request(baseUrl, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce });
  assert.is(done.status, 201, await done.clone().text());
  return device;
}

/** Registers an Environment through the operator listener, as the operators' command line does. */
export async function registerEnvironment(
  opsUrl: string,
  input: { environmentId: string; origin: string; ownerHandle: string; redirectUris: string[]; clientName?: string },
): Promise<{ clientId: string }> {
  const res = await fetch(`${opsUrl}/registry/environments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'test-operator' },
    body: JSON.stringify(input),
  });
  assert.is(res.status, 201, await res.clone().text());
  return ((await res.json()) as { client: { clientId: string } }).client;
}

export async function assertProblem(res: Response, status: number, code: string): Promise<void> {
  const text = await res.clone().text();
  assert.is(res.status, status, `expected ${status} ${code}, got ${res.status} ${text}`);
  assert.is(res.headers.get('content-type'), 'application/problem+json');
  const body = await jsonOf(res);
  assert.is(body.code, code, text);
  assert.is(body.requestId, res.headers.get('x-request-id'));
}

export async function assertApiError(res: Response, status: number, code: string): Promise<void> {
  const text = await res.clone().text();
  assert.is(res.status, status, `expected ${status} ${code}, got ${res.status} ${text}`);
  assert.is(res.headers.get('content-type'), 'application/json');
  const body = (await jsonOf(res)).error as { code: string; requestId: string };
  assert.is(body.code, code, text);
  assert.is(body.requestId, res.headers.get('x-request-id'));
}

/**
 * Makes an enrolled person a reviewer the way people become one: the operators make them a platform administrator,
 * who grants themselves reviewer authority with a desktop management bearer.
 */
export async function makeReviewer(server: { url: string; opsUrl: string }, handle: string, device: DeviceClient, accountId: string): Promise<void> {
  const admin = await fetch(`${server.opsUrl}/registry/accounts/${handle}/platform-admin`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops' },
    body: JSON.stringify({ reason: 'first administrator' }),
  });
  assert.is(admin.status, 200, await admin.text());
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(desktop.status, 201, await desktop.clone().text());
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const granted = await fetch(`${server.url}/v1/admin/reviewer-authorities/${accountId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'review rota' }),
  });
  assert.is(granted.status, 200, await granted.text());
}
