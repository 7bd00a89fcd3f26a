import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import type { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Browser SSO logout ends the Environment grants authorized in the browser and spends its unexchanged codes. An
 * authorization (prompt=none) or a code exchange that runs while the logout runs must not leave a sign-in of that
 * browser working after the logout has answered.
 */
let server: TestServer;
const ORIGIN = 'https://env-race.example';
const REDIRECT = `${ORIGIN}/callback`;
let envClient: string;
let device: DeviceClient;
let bearer: string;

withTestServer(test, (started) => ({ server } = started), productParts);
test.before(async () => {
  ({ device } = await enrolFirst(server.url, 'lena'));
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-race', origin: ORIGIN, ownerHandle: 'lena', redirectUris: [REDIRECT] }));
  // The person agreed once, so prompt=none answers with a code at once.
  const first = new RegistryBrowser(server.url, device);
  assert.is((await first.openPageSession()).status, 204);
  assert.ok((await first.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge }))).location?.searchParams.get('code'));
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(desktop.status, 201);
  bearer = ((await desktop.json()) as { accessToken: string }).accessToken;
});

/** A browser with a page session and a console session (same browser id); returns the logout request to fire. */
async function signedInBrowser(): Promise<{ browser: RegistryBrowser; logout: () => Promise<Response> }> {
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  const console = await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
  assert.is(console.status, 200);
  const { csrfToken } = (await console.json()) as { csrfToken: string };
  return { browser, logout: () => browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': csrfToken } }) };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether a code, exchanged now, yields a runtime token that still opens a Runtime session. */
async function stillSignedIn(code: string, verifier: string): Promise<boolean> {
  const exchanged = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code, redirect_uri: REDIRECT, code_verifier: verifier });
  if (exchanged.status !== 200) return false;
  const page = new RuntimeClient(server.url, String(exchanged.body.access_token), ORIGIN);
  return (await page.createSession()).status === 201;
}

test('prompt=none racing the logout: no code of the browser works once the logout has answered', async () => {
  let survived = 0;
  for (let i = 0; i < 60 && survived === 0; i++) {
    const { browser, logout } = await signedInBrowser();
    const { verifier, challenge } = pkcePair();
    const url = authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge, prompt: 'none' });
    const loggedOut = logout();
    await pause(i % 4);
    const authorized = await browser.fetch(url);
    assert.is((await loggedOut).status, 200);
    const code = new URL(authorized.headers.get('location')!).searchParams.get('code');
    if (code && (await stillSignedIn(code, verifier))) survived++;
  }
  assert.is(survived, 0, 'a code issued in the browser while it logged out signed the browser in to the Environment after the logout');
});

test('a code exchange racing the logout: no grant of the browser works once the logout has answered', async () => {
  let survived = 0;
  for (let i = 0; i < 60 && survived === 0; i++) {
    const { browser, logout } = await signedInBrowser();
    const { verifier, challenge } = pkcePair();
    const authorized = await browser.fetch(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge, prompt: 'none' }));
    const code = new URL(authorized.headers.get('location')!).searchParams.get('code')!;
    assert.ok(code);
    const loggedOut = logout();
    await pause(i % 4);
    const exchanged = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code, redirect_uri: REDIRECT, code_verifier: verifier });
    assert.is((await loggedOut).status, 200);
    if (exchanged.status !== 200) continue;
    const page = new RuntimeClient(server.url, String(exchanged.body.access_token), ORIGIN);
    if ((await page.createSession()).status === 201) survived++;
  }
  assert.is(survived, 0, 'a grant exchanged while the browser logged out still works after the logout');
});

test.run();
