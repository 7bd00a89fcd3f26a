import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { DESKTOP_SESSION_TTL_S } from '../../identity/oauth-grants.js';
import { CookieJar } from '../../client/oidc-client.js';
import { PAGE_SESSION_TTL_MS, type BrowserSessionKind } from '../../identity/browser-sessions.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { LIVE_SESSION_CAPS } from '../../identity/live-session-caps.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Live browser sessions per account are capped (identity/live-session-caps.ts): a new page or console session ends
 * the account's oldest beyond the cap, through HTTP against the real server, racing creations included.
 */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());

withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);

type Person = { device: DeviceClient; accountId: string };
const people = new Map<string, Person>();
// Enrolled before any test moves the server's clock (enrolment signs with the real one).
test.before(async () => {
  for (const handle of ['erin', 'fay', 'gus', 'hal', 'ivy', 'jon', 'kim']) {
    const enrolled = await enrolFirst(server.url, handle);
    enrolled.device.now = () => clock.now();
    people.set(handle, enrolled);
  }
});

async function person(handle: string): Promise<Person> {
  return people.get(handle)!;
}

/** A page session in a browser of its own (no cookie sent: each names a new browser), a millisecond after the last. */
async function pageBrowser(device: DeviceClient, tick = true): Promise<RegistryBrowser> {
  if (tick) clock.advance(1);
  const browser = new RegistryBrowser(server.url, device);
  const res = await browser.openPageSession();
  assert.is(res.status, 204, await res.clone().text());
  return browser;
}

async function sessions(accountId: string, kind: BrowserSessionKind): Promise<Array<{ id: string; live: boolean; reason: string | null }>> {
  const now = new Date(clock.now());
  const rows = await db.connection.db
    .selectFrom('browser_sessions')
    .select(['id', 'revoked_at', 'revoked_reason', 'expires_at'])
    .where('account_id', '=', accountId)
    .where('kind', '=', kind)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ id: r.id, live: r.revoked_at === null && r.expires_at > now, reason: r.revoked_reason }));
}

const liveCount = async (accountId: string, kind: BrowserSessionKind): Promise<number> => (await sessions(accountId, kind)).filter((s) => s.live).length;

/** The authorization page as that browser sees it: 200 (consent) while its page session lives, 401 (sign in) after. */
async function authorizeStatus(browser: RegistryBrowser): Promise<number> {
  const url = authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri: 'http://127.0.0.1:9/callback', challenge: pkcePair().challenge, state: 's', scope: 'openid management' });
  const res = await browser.fetch(url);
  await res.arrayBuffer();
  return res.status;
}

test('page sessions: at the cap a new sign-in succeeds and ends the oldest, so the cap stays live', async () => {
  const cap = LIVE_SESSION_CAPS.page;
  const erin = await person('erin');
  const first = await pageBrowser(erin.device);
  for (let i = 1; i < cap; i++) await pageBrowser(erin.device);
  assert.is(await liveCount(erin.accountId, 'page'), cap);
  assert.is(await authorizeStatus(first), 200);

  const newest = await pageBrowser(erin.device);
  const rows = await sessions(erin.accountId, 'page');
  assert.is(rows.filter((s) => s.live).length, cap);
  assert.equal(rows[0], { id: rows[0]!.id, live: false, reason: 'session_cap' });
  assert.is(await authorizeStatus(first), 401, 'the oldest page session ended');
  assert.is(await authorizeStatus(newest), 200);
});

test('page sessions: racing sign-ins at the cap leave exactly the cap live, the newest among them', async () => {
  const cap = LIVE_SESSION_CAPS.page;
  const fay = await person('fay');
  for (let i = 0; i < cap - 1; i++) await pageBrowser(fay.device);
  clock.advance(1);
  const raced = await Promise.all(Array.from({ length: 8 }, () => pageBrowser(fay.device, false)));
  assert.is(await liveCount(fay.accountId, 'page'), cap);
  for (const browser of raced) assert.is(await authorizeStatus(browser), 200, 'every raced sign-in is among the newest and live');
  const rows = await sessions(fay.accountId, 'page');
  assert.ok(rows.slice(0, 7).every((s) => !s.live && s.reason === 'session_cap'), 'the seven oldest ended');
});

test('page sessions: expired and revoked ones do not count; another account is unaffected', async () => {
  const cap = LIVE_SESSION_CAPS.page;
  const gus = await person('gus');
  const hal = await person('hal');
  const hals = [await pageBrowser(hal.device), await pageBrowser(hal.device)];
  for (let i = 0; i < cap; i++) await pageBrowser(gus.device);
  // Gus's sessions end on their own; their rows stay until the sweep and must not count.
  clock.advance(PAGE_SESSION_TTL_MS + 1000);
  const fresh = [await pageBrowser(hal.device)];
  for (let i = 0; i < cap; i++) fresh.push(await pageBrowser(gus.device));
  const rows = await sessions(gus.accountId, 'page');
  assert.is(rows.filter((s) => s.live).length, cap);
  assert.ok(rows.every((s) => s.reason === null), 'nothing was ended early: the expired rows were not counted');
  // A logout (revoked rows) frees places too: the next sign-in ends nobody.
  await db.connection.db.updateTable('browser_sessions').set({ revoked_at: new Date(clock.now()), revoked_reason: 'browser_logout' }).where('id', '=', rows.at(-1)!.id).execute();
  await pageBrowser(gus.device);
  assert.ok((await sessions(gus.accountId, 'page')).every((s) => s.reason !== 'session_cap'));
  // Hal's own sessions (two expired, one live) were never touched by Gus's.
  assert.ok((await sessions(hal.accountId, 'page')).every((s) => s.reason === null));
  assert.is(await authorizeStatus(fresh[0]!), 200);
  assert.is(await authorizeStatus(hals[0]!), 401, 'expired, not ended early');
});

/** A desktop management bearer of that device (the console exchanges it). */
async function bearerOf(device: DeviceClient): Promise<string> {
  const res = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(res.status, 201, await res.clone().text());
  return String(((await res.json()) as { accessToken: string }).accessToken);
}

/** A console session in a browser of its own, a millisecond after the last (unless told otherwise). */
async function consoleBrowser(accessToken: string, tick = true): Promise<CookieJar> {
  if (tick) clock.advance(1);
  const jar = new CookieJar();
  const res = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  assert.is(res.status, 200, await res.clone().text());
  jar.store(res);
  return jar;
}

async function signedIn(jar: CookieJar): Promise<boolean> {
  const res = await fetch(`${server.url}/v1/auth/me`, { headers: { cookie: jar.header() } });
  return ((await res.json()) as { authenticated: boolean }).authenticated;
}

test('console sessions: at the cap a new one succeeds and ends the oldest; another account is unaffected', async () => {
  const cap = LIVE_SESSION_CAPS.console;
  const ivy = await person('ivy');
  const jon = await person('jon');
  const jons = await consoleBrowser(await bearerOf(jon.device));
  const bearer = await bearerOf(ivy.device);
  const first = await consoleBrowser(bearer);
  for (let i = 1; i < cap; i++) await consoleBrowser(bearer);
  assert.is(await liveCount(ivy.accountId, 'console'), cap);
  assert.ok(await signedIn(first));

  const newest = await consoleBrowser(bearer);
  const rows = await sessions(ivy.accountId, 'console');
  assert.is(rows.filter((s) => s.live).length, cap);
  assert.equal(rows[0], { id: rows[0]!.id, live: false, reason: 'session_cap' });
  assert.not.ok(await signedIn(first), 'the oldest console session ended');
  assert.ok(await signedIn(newest));
  assert.ok(await signedIn(jons));
  assert.is(await liveCount(jon.accountId, 'console'), 1);
});

test('console sessions: racing ones at the cap leave exactly the cap live; expired ones do not count', async () => {
  const cap = LIVE_SESSION_CAPS.console;
  const kim = await person('kim');
  let bearer = await bearerOf(kim.device);
  for (let i = 0; i < cap - 1; i++) await consoleBrowser(bearer);
  clock.advance(1);
  const raced = await Promise.all(Array.from({ length: 6 }, () => consoleBrowser(bearer, false)));
  assert.is(await liveCount(kim.accountId, 'console'), cap);
  for (const jar of raced) assert.ok(await signedIn(jar), 'every raced console session is among the newest and live');

  // They all end with their desktop session (an hour); a new bearer's console sessions then end nobody.
  clock.advance(DESKTOP_SESSION_TTL_S * 1000 + 1000);
  bearer = await bearerOf(kim.device);
  for (let i = 0; i < cap; i++) await consoleBrowser(bearer);
  const rows = await sessions(kim.accountId, 'console');
  assert.is(rows.filter((s) => s.live).length, cap);
  assert.is(rows.filter((s) => s.reason === 'session_cap').length, 5, 'only the race ended any');
});

test.run();
