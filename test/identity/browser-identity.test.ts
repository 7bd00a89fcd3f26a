import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Which browser a session belongs to is what browser SSO logout ends: the `__Host-registry_browser` cookie names it.
 * Every session a browser holds must be found by its logout, however the browser came to hold it.
 */
let server: TestServer;
const ORIGIN = 'https://browser-identity.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;
let device: DeviceClient;

withTestServer(test, (started) => ({ server } = started), productParts);
test.before(async () => {
  ({ device } = await enrolFirst(server.url, 'bianca'));
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-browser-id', origin: ORIGIN, ownerHandle: 'bianca', redirectUris: [REDIRECT] }));
});

async function desktopBearer(): Promise<string> {
  const res = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(res.status, 201, await res.clone().text());
  return ((await res.json()) as { accessToken: string }).accessToken;
}

/** Signs the browser in to the Environment through its page session; returns the runtime access token. */
async function environmentSignIn(browser: RegistryBrowser): Promise<string> {
  const { verifier, challenge } = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge }));
  const code = location?.searchParams.get('code');
  assert.ok(code, 'the browser is signed in to the registry page');
  const exchanged = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.is(exchanged.status, 200);
  return String(exchanged.body.access_token);
}

const runtimeWorks = async (token: string): Promise<boolean> => (await new RuntimeClient(server.url, token, ORIGIN).createSession()).status === 201;

const browserCookieOf = (res: Response): string | undefined => res.headers.getSetCookie().find((c) => c.startsWith('__Host-registry_browser='));

test('the browser cookie is renewed by every session made in the browser, so it never lapses under a live session', async () => {
  const browser = new RegistryBrowser(server.url, device);
  const first = await browser.openPageSession();
  const planted = browserCookieOf(first);
  assert.ok(planted, 'a new browser is named');
  const id = browser.jar.get('__Host-registry_browser');
  // The cookie was planted with a lifetime counted from this moment; every later session of the browser must push it
  // forward, or it lapses (400 days on) while the browser holds sessions named by it, and the next session is named
  // by a new id that a logout through the older sessions never finds.
  const again = await browser.openPageSession();
  const renewed = browserCookieOf(again);
  assert.ok(renewed, 'a page session renews the browser cookie');
  assert.ok(renewed!.startsWith(`__Host-registry_browser=${id};`), 'with the same browser id');
  assert.match(renewed!, /Max-Age=34560000;.*HttpOnly; Secure; SameSite=Lax/);
  const console = await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${await desktopBearer()}` } });
  assert.is(console.status, 200);
  assert.ok(browserCookieOf(console)?.startsWith(`__Host-registry_browser=${id};`), 'a console session renews it too');
});

test('logout ends the sessions of the browser its cookies name, not only the browser of the console session', async () => {
  // A browser's first page and console sessions made at once (the desktop app opening both): neither request carried
  // a browser cookie, so each named the browser afresh, and the browser kept one of the two.
  const browser = new RegistryBrowser(server.url, device);
  const bearer = await desktopBearer();
  const [page, console] = await Promise.all([
    browser.openPageSession(),
    fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } }),
  ]);
  assert.is(page.status, 204);
  assert.is(console.status, 200);
  browser.jar.store(console);
  const { csrfToken } = (await console.json()) as { csrfToken: string };
  const token = await environmentSignIn(browser);
  assert.ok(await runtimeWorks(token));

  const loggedOut = await browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': csrfToken } });
  assert.is(loggedOut.status, 200, await loggedOut.clone().text());
  assert.not.ok(await runtimeWorks(token), 'the Environment sign-in made through this browser ended with its logout');
});

test("a browser cookie naming a browser that holds none of the caller's sessions does not log that browser out", async () => {
  // Bianca's browser, signed in to the Environment.
  const bianca = new RegistryBrowser(server.url, device);
  assert.is((await bianca.openPageSession()).status, 204);
  const token = await environmentSignIn(bianca);
  const biancaBrowser = bianca.jar.get('__Host-registry_browser');
  assert.ok(biancaBrowser);
  // Mallory, with a console session of her own, sends Bianca's browser id as her browser cookie (it is no credential).
  const { device: mallory } = await enrolFirst(server.url, 'mallory');
  const issued = await mallory.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await issued.json()) as { accessToken: string };
  const console = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  assert.is(console.status, 200);
  const consoleCookie = console.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith('__Host-registry_console='));
  assert.ok(consoleCookie);
  const loggedOut = await fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie: `${consoleCookie}; __Host-registry_browser=${biancaBrowser}` } });
  assert.is(loggedOut.status, 200, await loggedOut.clone().text());
  assert.ok(await runtimeWorks(token), "Mallory's logout ended Bianca's Environment sign-in through a forged browser cookie");
});

/** Bianca's browser, signed in to the Environment: its browser id and the runtime token made through it. */
async function biancaSignedIn(): Promise<{ browserId: string; token: string }> {
  const bianca = new RegistryBrowser(server.url, device);
  assert.is((await bianca.openPageSession()).status, 204);
  const token = await environmentSignIn(bianca);
  const browserId = bianca.jar.get('__Host-registry_browser');
  assert.ok(browserId);
  assert.ok(await runtimeWorks(token));
  return { browserId, token };
}

const cookieOf = (res: Response, name: string): string | undefined => res.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith(`${name}=`));

test("a console session made with another account's browser id as its browser cookie is not of that browser", async () => {
  const { browserId, token } = await biancaSignedIn();
  // Mallory sends Bianca's browser id when she makes her console session: no browser would send it, but the cookie is no
  // credential. Taken as named, her session was of Bianca's browser, and her logout ended Bianca's sign-ins.
  const { device: mallory } = await enrolFirst(server.url, 'mallory2');
  const issued = await mallory.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await issued.json()) as { accessToken: string };
  const console = await fetch(`${server.url}/v1/auth/console-session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${accessToken}`, cookie: `__Host-registry_browser=${browserId}` },
  });
  assert.is(console.status, 200, await console.clone().text());
  const named = cookieOf(console, '__Host-registry_browser');
  assert.ok(named && named !== `__Host-registry_browser=${browserId}`, "Mallory's browser is named afresh, not planted with Bianca's id");
  const loggedOut = await fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie: cookieOf(console, '__Host-registry_console')! } });
  assert.is(loggedOut.status, 200, await loggedOut.clone().text());
  assert.ok(await runtimeWorks(token), "Mallory's logout ended Bianca's Environment sign-in");
});

test("a page session made with another account's browser id as its browser cookie is not of that browser", async () => {
  const { browserId, token } = await biancaSignedIn();
  const { device: mallory } = await enrolFirst(server.url, 'mallory3');
  const page = await mallory.request(server.url, 'POST', '/v1/account/page-session', undefined, { headers: { cookie: `__Host-registry_browser=${browserId}` } });
  assert.is(page.status, 204, await page.clone().text());
  const issued = await mallory.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await issued.json()) as { accessToken: string };
  const console = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  assert.is(console.status, 200);
  // Her logout names the browser of the page session she carries, whatever that session's state.
  const cookie = `${cookieOf(console, '__Host-registry_console')!}; ${cookieOf(page, '__Host-registry_page')!}`;
  const loggedOut = await fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie } });
  assert.is(loggedOut.status, 200, await loggedOut.clone().text());
  assert.ok(await runtimeWorks(token), "Mallory's logout ended Bianca's Environment sign-in");
});

test.run();
