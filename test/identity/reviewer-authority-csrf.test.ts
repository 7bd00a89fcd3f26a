import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertApiError, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * "Cookie callers need CSRF on the operations that say so": the platform-admin grant says so, the reviewer-authority
 * rows (`PUT, DELETE /v1/admin/reviewer-authorities/{userId}`) do not. An administrator's console cookie alone
 * grants and revokes reviewer authority; the platform-admin grant still wants `X-CSRF-Token`.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

/** A browser holding a console session of `handle`, made a platform administrator by the operator. */
async function adminBrowser(handle: string): Promise<RegistryBrowser> {
  const { device } = await enrolFirst(server.url, handle);
  const granted = await fetch(`${server.opsUrl}/registry/accounts/${handle}/platform-admin`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops-test' },
    body: JSON.stringify({ reason: 'first administrator' }),
  });
  assert.is(granted.status, 200, await granted.clone().text());
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(desktop.status, 201, await desktop.clone().text());
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const browser = new RegistryBrowser(server.url, device);
  const console = await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  assert.is(console.status, 200, await console.clone().text());
  return browser;
}

const withReason = (method: string) => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ reason: 'review rota' }) });

test('the console cookie alone grants and revokes reviewer authority (the spec marks no CSRF on these rows)', async () => {
  const browser = await adminBrowser('quinn');
  const { accountId } = await enrolFirst(server.url, 'rosa');
  const granted = await browser.fetch(`${server.url}/v1/admin/reviewer-authorities/${accountId}`, withReason('PUT'));
  assert.is(granted.status, 200, await granted.clone().text());
  assert.equal(await jsonOf(granted), { userId: accountId, reviewer: true, changed: true });
  const listed = await browser.fetch(`${server.url}/v1/admin/reviewer-authorities`);
  assert.equal(((await jsonOf(listed)).authorities as Array<{ handle: string }>).map((a) => a.handle), ['rosa']);
  const revoked = await browser.fetch(`${server.url}/v1/admin/reviewer-authorities/${accountId}`, withReason('DELETE'));
  assert.is(revoked.status, 200, await revoked.clone().text());
  assert.equal(await jsonOf(revoked), { userId: accountId, reviewer: false, changed: true });
});

test('the platform-admin grant, which the spec marks CSRF-protected, still refuses the cookie alone', async () => {
  const browser = await adminBrowser('sami');
  const { accountId } = await enrolFirst(server.url, 'tove');
  await assertApiError(await browser.fetch(`${server.url}/v1/admin/users/${accountId}/platform-admin`, withReason('PUT')), 403, 'csrf_required');
});

test.run();
