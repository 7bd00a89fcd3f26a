import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, cliSignIn, CookieJar, pkcePair, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertApiError, assertProblem, enrolAnother, enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** Management and console sessions through HTTP: desktop sessions, console exchange, CSRF, CLI grants, SSO logout, admin. */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
let carol: { device: DeviceClient; accountId: string };
let dan: { device: DeviceClient; accountId: string };

withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);
test.before(async () => {
  carol = await enrolFirst(server.url, 'carol');
  dan = await enrolFirst(server.url, 'dan');
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function desktopSession(device: DeviceClient): Promise<{ sessionId: string; accessToken: string; scopes: string[] }> {
  const res = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(res.status, 201, await res.clone().text());
  return (await res.json()) as { sessionId: string; accessToken: string; scopes: string[] };
}

/** A browser that signed in to the console with a management bearer. */
async function consoleBrowser(accessToken: string, jar = new CookieJar()): Promise<{ jar: CookieJar; csrf: string; body: Record<string, unknown> }> {
  const res = await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { ...bearer(accessToken), ...(jar.header() ? { cookie: jar.header() } : {}) } });
  assert.is(res.status, 200, await res.clone().text());
  // The console cookie: HttpOnly (no script reads it), Secure, SameSite=Strict, host-only (__Host-).
  assert.ok(res.headers.getSetCookie().some((c) => /^__Host-registry_console=[^;]+;.*HttpOnly; Secure; SameSite=Strict/.test(c)), res.headers.getSetCookie().join(' | '));
  jar.store(res);
  const body = await jsonOf(res);
  return { jar, csrf: String(body.csrfToken), body };
}

async function cliTokens(device: DeviceClient): Promise<TokenSet> {
  const browser = new RegistryBrowser(server.url, device);
  const page = await browser.openPageSession();
  // The page session is an HttpOnly cookie (issue 3): Secure, SameSite=Lax so the OIDC redirect back carries it.
  assert.ok(page.headers.getSetCookie().some((c) => /^__Host-registry_page=[^;]+;.*HttpOnly; Secure; SameSite=Lax/.test(c)), page.headers.getSetCookie().join(' | '));
  return cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
}

test('desktop management sessions: body-bound, scopes derived and never asked for, revocable by their account only', async () => {
  const asked = await carol.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', { scopes: ['platform:admin'] });
  await assertProblem(asked, 400, 'validation_failed');
  const unbound = await carol.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {}, { bindBody: false });
  await assertProblem(unbound, 401, 'device_assertion_body_mismatch');
  await assertProblem(await fetch(`${server.url}/v1/account/desktop-management-sessions`, { method: 'POST', headers: bearer('cli-token') }), 401, 'device_assertion_required');

  const session = await desktopSession(carol.device);
  assert.equal(session.scopes, ['management']);
  assert.is((await fetch(`${server.url}/v1/auth/me`, { headers: bearer(session.accessToken) }).then(jsonOf)).authenticated, true);
  await assertProblem(await dan.device.request(server.url, 'DELETE', `/v1/account/desktop-management-sessions/${session.sessionId}`), 404, 'management_session_not_found');
  const revoked = await carol.device.request(server.url, 'DELETE', `/v1/account/desktop-management-sessions/${session.sessionId}`);
  assert.is(revoked.status, 200);
  assert.is((await jsonOf(revoked)).revoked, true);
  await assertProblem(await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: bearer(session.accessToken) }), 401, 'access_token_revoked');
});

test('console session: refusals, then a cookie with CSRF token; GET /v1/auth/me follows the caller', async () => {
  await assertProblem(await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST' }), 401, 'management_token_required');
  await assertProblem(await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: bearer('forged.jwt.token') }), 401, 'access_token_invalid');
  assert.equal(await fetch(`${server.url}/v1/auth/me`).then(jsonOf), { authenticated: false });
  assert.equal(await fetch(`${server.url}/v1/auth/me`, { headers: { cookie: '__Host-registry_console=rcs_forged' } }).then(jsonOf), { authenticated: false });

  const session = await desktopSession(carol.device);
  const console = await consoleBrowser(session.accessToken);
  assert.equal(console.body.account, { handle: 'carol', platformAdmin: false });
  const cookie = console.jar.get('__Host-registry_console');
  assert.ok(cookie);
  const res = await fetch(`${server.url}/v1/auth/me`, { headers: { cookie: console.jar.header() } });
  assert.equal(await jsonOf(res), { authenticated: true, credential: 'developerSession', account: { handle: 'carol', platformAdmin: false } });
});

test('CLI sessions: listed without tokens or subjects; revoked one by one; cookie callers need CSRF', async () => {
  const first = await cliTokens(carol.device);
  const second = await cliTokens(carol.device);
  const listed = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(first.access_token) });
  assert.is(listed.status, 200);
  const text = await listed.clone().text();
  for (const secret of [first.access_token, first.refresh_token!, second.refresh_token!, carol.accountId]) assert.not.ok(text.includes(secret), 'no secret or raw subject');
  const sessions = ((await listed.json()) as { sessions: Array<{ sessionId: string; current: boolean; clientName: string }> }).sessions;
  assert.is(sessions.length, 2);
  assert.is(sessions.filter((s) => s.current).length, 1);
  const secondId = sessions.find((s) => !s.current)!.sessionId;

  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions`), 401, 'developer_session_required');
  const danTokens = await cliTokens(dan.device);
  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions/${secondId}`, { method: 'DELETE', headers: bearer(danTokens.access_token) }), 404, 'management_session_not_found');

  // Through the console cookie: CSRF missing, wrong, then right.
  const console = await consoleBrowser((await desktopSession(carol.device)).accessToken);
  const del = (headers: Record<string, string>) => fetch(`${server.url}/v1/auth/management-sessions/${secondId}`, { method: 'DELETE', headers: { cookie: console.jar.header(), ...headers } });
  await assertApiError(await del({}), 403, 'csrf_required');
  await assertApiError(await del({ 'x-csrf-token': 'guess' }), 403, 'csrf_invalid');
  const ok = await del({ 'x-csrf-token': console.csrf });
  assert.is(ok.status, 200);
  // Its access and refresh material are gone; the other sign-in is untouched.
  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(second.access_token) }), 401, 'access_token_revoked');
  const refresh = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: second.refresh_token! });
  assert.is(refresh.body.code, 'grant_revoked');
  assert.is((await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(first.access_token) })).status, 200);
});

test('browser SSO logout: the console cookie alone; ends the console and page sessions of that browser and its Environment grants; CLI survives', async () => {
  const { clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'env-logout', origin: 'https://logout.example', ownerHandle: 'carol', redirectUris: ['https://logout.example/cb'] });
  const cli = await cliTokens(carol.device);
  // One browser: a page session (device), a console session (desktop bearer), and an Environment sign-in through it.
  const browser = new RegistryBrowser(server.url, carol.device);
  assert.is((await browser.openPageSession()).status, 204);
  const console = await consoleBrowser((await desktopSession(carol.device)).accessToken, browser.jar);
  const pkce = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: 'https://logout.example/cb', challenge: pkce.challenge }));
  const exchanged = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: location!.searchParams.get('code')!, redirect_uri: 'https://logout.example/cb', code_verifier: pkce.verifier });
  assert.is(exchanged.status, 200);
  // Another browser of the same person keeps its console session.
  const otherBrowser = await consoleBrowser((await desktopSession(carol.device)).accessToken);

  // A code issued in this browser but not exchanged before the logout.
  const late = pkcePair();
  const pending = (await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: 'https://logout.example/cb', challenge: late.challenge }))).location!;
  const logout = (headers: Record<string, string>) => fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie: browser.jar.header(), ...headers } });
  await assertProblem(await fetch(`${server.url}/v1/auth/logout`, { method: 'POST' }), 401, 'developer_session_required');
  const done = await logout({});
  assert.is(done.status, 200);
  assert.equal(await jsonOf(done), { ok: true });
  assert.ok(done.headers.getSetCookie().some((c) => c.startsWith('__Host-registry_console=;') && /Max-Age=0/.test(c)));

  // The old cookie, replayed as a thief would: the session is over on the server, not merely cleared in the browser.
  await assertProblem(await logout({ 'x-csrf-token': console.csrf }), 401, 'developer_session_invalid');
  assert.equal(await fetch(`${server.url}/v1/auth/me`, { headers: { cookie: browser.jar.header() } }).then(jsonOf), { authenticated: false });
  const envGrants = await db.connection.db.selectFrom('oauth_grants').select(['kind', 'revoked_reason']).where('kind', '=', 'environment').execute();
  assert.ok(envGrants.length > 0 && envGrants.every((g) => g.revoked_reason === 'browser_logout'), JSON.stringify(envGrants));
  const afterLogout = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: pending.searchParams.get('code')!, redirect_uri: 'https://logout.example/cb', code_verifier: late.verifier });
  assert.is(afterLogout.body.error, 'invalid_grant', 'a code of a logged-out browser mints nothing');
  const page = await browser.fetch(authorizationUrl(server.url, { clientId, redirectUri: 'https://logout.example/cb', challenge: pkcePair().challenge }));
  assert.is(page.status, 401, 'the page session of that browser ended');
  assert.is((await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(cli.access_token) })).status, 200, 'CLI credentials survive');
  assert.is((await fetch(`${server.url}/v1/auth/me`, { headers: { cookie: otherBrowser.jar.header() } }).then(jsonOf)).authenticated, true, 'another browser survives');
});

test('platform admin: refused to non-admins and without CSRF; granted atomically with its audit record; repeat is a no-op', async () => {
  const carolConsole = await consoleBrowser((await desktopSession(carol.device)).accessToken);
  const put = (jar: CookieJar, csrf: string | undefined, userId: string, body: unknown = { reason: 'on call rotation' }) =>
    fetch(`${server.url}/v1/admin/users/${userId}/platform-admin`, {
      method: 'PUT',
      headers: { cookie: jar.header(), 'content-type': 'application/json', ...(csrf ? { 'x-csrf-token': csrf } : {}) },
      body: JSON.stringify(body),
    });
  await assertApiError(await put(carolConsole.jar, carolConsole.csrf, dan.accountId), 403, 'admin_required');
  // The operator grants carol through the operator listener (the operators' command line does the same).
  const granted = await fetch(`${server.opsUrl}/registry/accounts/carol/platform-admin`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops-alice' },
    body: JSON.stringify({ reason: 'first administrator' }),
  });
  assert.is(granted.status, 200);
  assert.is((await jsonOf(granted)).changed, true);
  const adminDesktop = await desktopSession(carol.device);
  assert.equal(adminDesktop.scopes, ['management', 'platform:admin']);
  const adminConsole = await consoleBrowser(adminDesktop.accessToken);
  assert.equal(adminConsole.body.account, { handle: 'carol', platformAdmin: true });
  await assertApiError(await put(adminConsole.jar, undefined, dan.accountId), 403, 'csrf_required');
  await assertApiError(await put(adminConsole.jar, adminConsole.csrf, dan.accountId, { reason: 'x' }), 400, 'validation_failed');
  await assertApiError(await put(adminConsole.jar, adminConsole.csrf, 'acc_00000000000000000000000000'), 404, 'user_not_found');
  const first = await put(adminConsole.jar, adminConsole.csrf, dan.accountId);
  assert.equal(await jsonOf(first), { userId: dan.accountId, platformAdmin: true, changed: true });
  const again = await put(adminConsole.jar, adminConsole.csrf, dan.accountId);
  assert.equal(await jsonOf(again), { userId: dan.accountId, platformAdmin: true, changed: false });
  const audit = (await fetch(`${server.opsUrl}/registry/audit?target=account:${dan.accountId}`).then(jsonOf)).events as Array<{ action: string; actor: string; reason: string }>;
  assert.equal(audit.map((e) => [e.action, e.actor, e.reason]), [['platform.admin.grant', `account:${carol.accountId}`, 'on call rotation']]);
  const carolAudit = (await fetch(`${server.opsUrl}/registry/audit?target=account:${carol.accountId}`).then(jsonOf)).events as Array<{ action: string; actor: string }>;
  assert.equal(carolAudit.map((e) => [e.action, e.actor]), [['platform.admin.grant', 'operator:ops-alice']]);
});

test('reviewer authority: granted by admins only; review host capabilities issued to its devices, released with the exact capability', async () => {
  // dan holds platform admin since the previous test; carol too.
  await assertProblem(await dan.device.request(server.url, 'POST', '/v1/review/host-capabilities', {}), 403, 'reviewer_authority_required');
  await assertProblem(await fetch(`${server.url}/v1/review/host-capabilities`, { method: 'POST', headers: bearer('cli') }), 401, 'device_assertion_required');
  const erin = await enrolFirst(server.url, 'erin');
  const erinBearer = (await desktopSession(erin.device)).accessToken;
  const grant = (token: string, userId: string, method = 'PUT') =>
    fetch(`${server.url}/v1/admin/reviewer-authorities/${userId}`, { method, headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ reason: 'review rota' }) });
  await assertApiError(await grant(erinBearer, carol.accountId), 403, 'admin_required');
  const danBearer = (await desktopSession(dan.device)).accessToken;
  assert.equal(await (await grant(danBearer, carol.accountId)).json(), { userId: carol.accountId, reviewer: true, changed: true });
  assert.equal(((await desktopSession(carol.device)).scopes), ['management', 'platform:admin', 'reviewer:admin']);
  const listed = (await (await fetch(`${server.url}/v1/admin/reviewer-authorities`, { headers: bearer(danBearer) })).json()) as { authorities: Array<{ handle: string }> };
  assert.equal(listed.authorities.map((a) => a.handle), ['carol']);

  const issue = async () => {
    const res = await carol.device.request(server.url, 'POST', '/v1/review/host-capabilities', {});
    assert.is(res.status, 201, await res.clone().text());
    return (await res.json()) as { capabilityId: string; capability: string; deviceId: string };
  };
  const cap = await issue();
  assert.is(cap.deviceId, carol.device.deviceId);
  const release = (device: DeviceClient, id: string, capability?: string, bindBody = true) =>
    device.request(server.url, 'DELETE', `/v1/review/host-capabilities/${id}`, undefined, {
      bindBody,
      headers: capability ? { 'platform-review-capability': capability } : {},
    });
  await assertProblem(await release(carol.device, cap.capabilityId), 401, 'review_capability_required');
  await assertProblem(await release(carol.device, cap.capabilityId, cap.capability, false), 401, 'device_assertion_body_mismatch');
  await assertProblem(await release(dan.device, cap.capabilityId, cap.capability), 401, 'review_capability_invalid');
  await assertProblem(await release(carol.device, cap.capabilityId, 'rhc_forged'), 401, 'review_capability_invalid');
  const other = await issue();
  await assertProblem(await release(carol.device, other.capabilityId, cap.capability), 403, 'review_capability_mismatch');
  assert.is((await release(carol.device, cap.capabilityId, cap.capability)).status, 204);
  assert.is((await release(carol.device, cap.capabilityId, cap.capability)).status, 204, 'already released: still 204');

  // Revoking the authority ends the outstanding capability, and the audit trail has both changes.
  assert.equal(await (await grant(danBearer, carol.accountId, 'DELETE')).json(), { userId: carol.accountId, reviewer: false, changed: true });
  const ended = await db.connection.db.selectFrom('review_host_capabilities').select('revoked_at').where('id', '=', other.capabilityId).executeTakeFirstOrThrow();
  assert.ok(ended.revoked_at);
  await assertProblem(await carol.device.request(server.url, 'POST', '/v1/review/host-capabilities', {}), 403, 'reviewer_authority_required');
  const audit = (await fetch(`${server.opsUrl}/registry/audit?target=account:${carol.accountId}`).then(jsonOf)).events as Array<{ action: string; actor: string }>;
  assert.equal(audit.map((e) => [e.action, e.actor]).slice(0, 2), [['reviewer.authority.revoke', `account:${dan.accountId}`], ['reviewer.authority.grant', `account:${dan.accountId}`]]);
});

test('a raised account epoch ends console sessions online', async () => {
  const frank = await enrolFirst(server.url, 'frank');
  const phone = await enrolAnother(server.url, 'frank', frank.device, 'frank phone');
  const console = await consoleBrowser((await desktopSession(frank.device)).accessToken);
  assert.is((await frank.device.request(server.url, 'DELETE', `/v1/account/devices/${phone.deviceId!}`)).status, 200);
  const logout = await fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { cookie: console.jar.header(), 'x-csrf-token': console.csrf } });
  await assertProblem(logout, 401, 'account_epoch_stale');
  assert.equal(await fetch(`${server.url}/v1/auth/me`, { headers: { cookie: console.jar.header() } }).then(jsonOf), { authenticated: false });
});

test.run();
