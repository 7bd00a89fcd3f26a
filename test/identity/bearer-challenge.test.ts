import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { assertApiError, assertProblem, enrolAnother, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6750 3: a resource server refusing a request for want of a valid bearer "MUST include the HTTP WWW-Authenticate
 * response header field", naming the Bearer scheme, and `error="invalid_token"` when the token sent was refused (none
 * when the request carried no credential). One rule in the gateway for every operation a bearer opens; the account
 * epoch's refusal of a management bearer and the refusal of an operation taking a bearer or the console cookie, sent
 * neither, answered 401 without one.
 */
let server: TestServer;
let erin: { device: DeviceClient };
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  erin = await enrolFirst(server.url, 'erin');
});

const INVALID_TOKEN = /^Bearer realm="registry", error="invalid_token"$/;
const NO_TOKEN = /^Bearer realm="registry"$/;

async function desktopBearer(device: DeviceClient): Promise<string> {
  const res = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(res.status, 201, await res.clone().text());
  return ((await res.json()) as { accessToken: string }).accessToken;
}

function challengeOf(res: Response): string {
  return res.headers.get('www-authenticate') ?? '(none)';
}

test('an operation taking a bearer or the console cookie, sent neither: 401 with a Bearer challenge without an error', async () => {
  const res = await fetch(`${server.url}/v1/auth/management-sessions`);
  await assertApiError(res, 401, 'developer_session_required');
  assert.match(challengeOf(res), NO_TOKEN, `WWW-Authenticate: ${challengeOf(res)}`);
  const revoke = await fetch(`${server.url}/v1/auth/management-sessions/grt_${'a'.repeat(22)}`, { method: 'DELETE' });
  assert.is(revoke.status, 401);
  assert.match(challengeOf(revoke), NO_TOKEN, `WWW-Authenticate: ${challengeOf(revoke)}`);
});

test('a management bearer issued under an account epoch since raised: 401 account_epoch_stale with error="invalid_token"', async () => {
  const token = await desktopBearer(erin.device);
  const phone = await enrolAnother(server.url, 'erin', erin.device, 'erin phone');
  const removed = await erin.device.request(server.url, 'DELETE', `/v1/account/devices/${phone.deviceId!}`);
  assert.is(removed.status, 200, await removed.clone().text());
  const listed = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${token}` } });
  await assertProblem(listed, 401, 'account_epoch_stale');
  assert.match(challengeOf(listed), INVALID_TOKEN, `WWW-Authenticate: ${challengeOf(listed)}`);
  const console = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  await assertProblem(console, 401, 'account_epoch_stale');
  assert.match(challengeOf(console), INVALID_TOKEN, `WWW-Authenticate: ${challengeOf(console)}`);
});

test('a forged or revoked bearer and a missing one keep their challenge; the refused token is named invalid_token', async () => {
  const forged = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: 'Bearer not.a.token' } });
  await assertProblem(forged, 401, 'access_token_invalid');
  assert.match(challengeOf(forged), INVALID_TOKEN, `WWW-Authenticate: ${challengeOf(forged)}`);
  const missing = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST' });
  await assertProblem(missing, 401, 'management_token_required');
  assert.match(challengeOf(missing), NO_TOKEN, `WWW-Authenticate: ${challengeOf(missing)}`);
  // A cookie-only operation names no Bearer challenge: no bearer would open it.
  const logout = await fetch(`${server.url}/v1/auth/logout`, { method: 'POST' });
  await assertProblem(logout, 401, 'developer_session_required');
  assert.is(logout.headers.get('www-authenticate'), null);
});

test.run();
