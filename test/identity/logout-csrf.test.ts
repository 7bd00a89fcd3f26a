import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertProblem, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * `POST /v1/auth/logout` takes the developer session as the spec gives it: "cookie callers need CSRF on the operations
 * that say so", and the logout row does not say so. The console cookie alone signs the browser out.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

/** A browser with a page session and a console session (through a desktop management bearer). */
async function signedInBrowser(handle: string): Promise<{ browser: RegistryBrowser; csrf: string }> {
  const { device } = await enrolFirst(server.url, handle);
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(desktop.status, 201, await desktop.clone().text());
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const console = await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  assert.is(console.status, 200, await console.clone().text());
  return { browser, csrf: String((await jsonOf(console)).csrfToken) };
}

test('the console cookie alone logs the browser out: 200 OkResponse, the sessions end', async () => {
  const { browser } = await signedInBrowser('lena');
  const done = await browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST' });
  assert.is(done.status, 200, await done.clone().text());
  assert.equal(await jsonOf(done), { ok: true });
  assert.equal(await jsonOf(await browser.fetch(`${server.url}/v1/auth/me`)), { authenticated: false });
});

test('still a developer-session operation: without the cookie 401, a replayed cookie after logout 401', async () => {
  await assertProblem(await fetch(`${server.url}/v1/auth/logout`, { method: 'POST' }), 401, 'developer_session_required');
  const { browser, csrf } = await signedInBrowser('mona');
  const cookie = browser.jar.header();
  assert.is((await browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': csrf } })).status, 200);
  await assertProblem(await fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie } }), 401, 'developer_session_invalid');
});

test.run();
