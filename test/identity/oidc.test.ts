import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, cliSignIn, pkcePair, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { AccessRecordSweep } from '../../identity/access-sweep.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { assertApiError, assertProblem, enrolAnother, enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** OIDC through HTTP: the authorization page, PKCE, codes, tokens, refresh rotation, pairwise subjects. Refusals first. */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
const ORIGIN = 'https://env-one.example';
const REDIRECT = `${ORIGIN}/callback`;
let envClient: string;
let alice: { device: DeviceClient; accountId: string };
let browser: RegistryBrowser;

withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-one', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  await registerEnvironment(server.opsUrl, { environmentId: 'env-two', origin: 'https://env-two.example', ownerHandle: 'alice', redirectUris: ['https://env-two.example/cb'] });
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const envAuthorize = (overrides: Record<string, string | undefined> = {}) => {
  const url = new URL(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 'st-1' }));
  for (const [k, v] of Object.entries(overrides)) v === undefined ? url.searchParams.delete(k) : url.searchParams.set(k, v);
  return url.href;
};

async function envCode(options: { nonce?: string } = {}): Promise<{ code: string; verifier: string }> {
  const { verifier, challenge } = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge, state: 's', ...options }));
  assert.ok(location, 'redirected back with a code');
  assert.is(location!.origin + location!.pathname, REDIRECT);
  return { code: location!.searchParams.get('code')!, verifier };
}

async function cliTokens(who: RegistryBrowser = browser): Promise<TokenSet> {
  return cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await who.authorize(url);
    assert.ok(location, 'the registry redirected to the loopback listener');
    await fetch(location!);
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

test('an unknown client or a redirect URI not registered for it gets an error page, never a redirect', async () => {
  for (const url of [
    envAuthorize({ client_id: 'envc_unknown' }),
    envAuthorize({ redirect_uri: 'https://evil.example/callback' }),
    envAuthorize({ redirect_uri: `${ORIGIN}/callback/other` }),
    envAuthorize({ redirect_uri: undefined }),
    // The CLI client: loopback IP literals only (RFC 8252), never localhost or a remote host.
    authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri: 'http://localhost:4000/callback', challenge: pkcePair().challenge }),
    authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri: 'https://evil.example:4000/cb', challenge: pkcePair().challenge }),
  ]) {
    const res = await browser.fetch(url);
    assert.is(res.status, 400, url);
    assert.is(res.headers.get('location'), null);
    assert.match(res.headers.get('content-type')!, /^text\/html/);
    assert.match(res.headers.get('content-security-policy')!, /frame-ancestors 'none'/);
    // Every error has a stable code and a request id: in the page as well as the header.
    const html = await res.text();
    assert.match(html, /<meta name="registry-error-code" content="(client_unknown|redirect_uri_invalid)">/, url);
    assert.ok(html.includes(`<meta name="registry-request-id" content="${res.headers.get('x-request-id')}">`));
  }
});

test('PKCE is required and only S256: plain, a missing or malformed challenge go back as invalid_request', async () => {
  for (const [overrides, error] of [
    [{ code_challenge_method: 'plain' }, 'invalid_request'],
    [{ code_challenge_method: undefined }, 'invalid_request'],
    [{ code_challenge: undefined }, 'invalid_request'],
    [{ code_challenge: 'short' }, 'invalid_request'],
    [{ response_type: 'token' }, 'unsupported_response_type'],
    [{ scope: 'openid management' }, 'invalid_scope'],
  ] as const) {
    const res = await browser.fetch(envAuthorize(overrides));
    assert.is(res.status, 303, JSON.stringify(overrides));
    const location = new URL(res.headers.get('location')!);
    assert.is(location.origin + location.pathname, REDIRECT);
    assert.is(location.searchParams.get('error'), error);
    assert.is(location.searchParams.get('state'), 'st-1');
    assert.is(location.searchParams.get('iss'), server.url);
    assert.is(location.searchParams.get('code'), null);
  }
});

test('without a page session: the sign-in page, or login_required with prompt=none', async () => {
  const stranger = new RegistryBrowser(server.url, alice.device);
  const page = await stranger.fetch(envAuthorize());
  assert.is(page.status, 401);
  const html = await page.text();
  assert.match(html, /Sign in with your desktop app/);
  assert.match(html, /<meta name="registry-error-code" content="page_session_required">/);
  const silent = await stranger.fetch(envAuthorize({ prompt: 'none' }));
  assert.is(new URL(silent.headers.get('location')!).searchParams.get('error'), 'login_required');
});

test('the consent form needs the page session and its CSRF token', async () => {
  const page = await browser.fetch(envAuthorize());
  assert.is(page.status, 200);
  const html = await page.text();
  assert.match(html, /@alice/);
  const form = new URLSearchParams();
  for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.set(name!, value!);
  form.set('decision', 'allow');
  const post = (body: URLSearchParams, cookie?: string) =>
    fetch(`${server.url}/v1/oidc/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
      body: body.toString(),
    });
  await assertProblem(await post(form), 401, 'page_session_required');
  const forged = new URLSearchParams(form);
  forged.set('csrf', 'not-the-token');
  await assertProblem(await post(forged, browser.jar.header()), 403, 'csrf_invalid');
  const denied = new URLSearchParams(form);
  denied.set('decision', 'deny');
  const deniedRes = await post(denied, browser.jar.header());
  assert.is(new URL(deniedRes.headers.get('location')!).searchParams.get('error'), 'access_denied');
  const allowed = await post(form, browser.jar.header());
  assert.is(allowed.status, 303);
  assert.ok(new URL(allowed.headers.get('location')!).searchParams.get('code'));
});

test('token endpoint refusals: unknown client, verifier mismatch burns the code, reuse, foreign redirect URI, bad grant types', async () => {
  const unknown = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: 'nobody', code: 'x', redirect_uri: REDIRECT, code_verifier: 'v'.repeat(43) });
  assert.is(unknown.status, 401);
  assert.is(unknown.body.error, 'invalid_client');
  assert.is(unknown.body.code, 'client_unknown');
  assert.type(unknown.body.requestId, 'string');

  const first = await envCode();
  const wrong = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: first.code, redirect_uri: REDIRECT, code_verifier: pkcePair().verifier });
  assert.is(wrong.status, 400);
  assert.equal([wrong.body.error, wrong.body.code], ['invalid_grant', 'pkce_verifier_mismatch']);
  // A failed attempt spends the code: whoever stole it cannot keep guessing.
  const after = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: first.code, redirect_uri: REDIRECT, code_verifier: first.verifier });
  assert.equal([after.body.error, after.body.code], ['invalid_grant', 'authorization_code_reused']);

  const second = await envCode();
  const foreign = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: second.code, redirect_uri: 'https://env-one.example/other', code_verifier: second.verifier });
  assert.equal([foreign.body.error, foreign.body.code], ['invalid_grant', 'redirect_uri_mismatch']);

  const otherClient = await envCode();
  const cross = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: CLI_CLIENT_ID, code: otherClient.code, redirect_uri: REDIRECT, code_verifier: otherClient.verifier });
  assert.equal([cross.body.error, cross.body.code], ['invalid_grant', 'authorization_code_invalid']);

  const plainVerifier = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: 'x', redirect_uri: REDIRECT, code_verifier: 'short' });
  assert.equal([plainVerifier.status, plainVerifier.body.code], [400, 'pkce_verifier_invalid']);
  const password = await tokenRequest(server.url, { grant_type: 'password', client_id: envClient });
  assert.equal([password.body.error, password.body.code], ['unsupported_grant_type', 'grant_type_unsupported']);
  const envRefresh = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: envClient, refresh_token: 'x' });
  assert.is(envRefresh.body.error, 'unauthorized_client');

  const repeated = await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=authorization_code&grant_type=refresh_token',
  });
  assert.is(repeated.status, 400);
  assert.is(((await repeated.json()) as { error: string }).error, 'invalid_request');
  const json = await fetch(`${server.url}/v1/oidc/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.is(json.status, 415);
});

test('a reused code revokes what its first use obtained', async () => {
  const tokens = await cliSignInCode();
  assert.is((await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(tokens.first.access_token) })).status, 200);
  const replay = await tokenRequest(server.url, tokens.replayForm);
  assert.equal([replay.body.error, replay.body.code], ['invalid_grant', 'authorization_code_reused']);
  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(tokens.first.access_token) }), 401, 'access_token_revoked');
  const refreshed = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: tokens.first.refresh_token! });
  assert.equal([refreshed.body.error, refreshed.body.code], ['invalid_grant', 'grant_revoked']);
});

/** A CLI authorization done by hand, so the test can replay the exact token request. */
async function cliSignInCode(): Promise<{ first: TokenSet; replayForm: Record<string, string> }> {
  const { verifier, challenge } = pkcePair();
  const redirectUri = 'http://127.0.0.1:45678/callback';
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge, state: 'x' }));
  const form = { grant_type: 'authorization_code', client_id: CLI_CLIENT_ID, code: location!.searchParams.get('code')!, redirect_uri: redirectUri, code_verifier: verifier };
  const first = await tokenRequest(server.url, form);
  assert.is(first.status, 200, JSON.stringify(first.body));
  return { first: first.body as unknown as TokenSet, replayForm: form };
}

test('Environment client: ID token with the pairwise subject, nonce and audience; a runtime token is no management bearer', async () => {
  const { code, verifier } = await envCode({ nonce: 'n-123' });
  const res = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.is(res.status, 200, JSON.stringify(res.body));
  const tokens = res.body as unknown as TokenSet;
  assert.is(tokens.token_type, 'Bearer');
  assert.is(tokens.refresh_token, undefined, 'Environment clients get no refresh token');
  const discovery = (await (await fetch(`${server.url}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  assert.equal(discovery.code_challenge_methods_supported, ['S256']);
  assert.is(discovery.issuer, server.url);
  const jwks = createLocalJWKSet((await (await fetch(String(discovery.jwks_uri))).json()) as { keys: [] });
  const id = await jwtVerify(tokens.id_token!, jwks, { issuer: server.url, audience: envClient, algorithms: ['ES256'], currentDate: new Date(clock.now()) });
  assert.is(id.payload.nonce, 'n-123');
  const actor = await alice.device.request(server.url, 'GET', '/v1/account/environments/env-one/actor');
  assert.is(actor.status, 200);
  const actorId = ((await actor.json()) as { actorId: string }).actorId;
  assert.is(id.payload.sub, actorId);
  assert.is.not(id.payload.sub, alice.accountId);
  const access = await jwtVerify(tokens.access_token, jwks, { issuer: server.url, audience: 'registry-runtime', typ: 'at+jwt', currentDate: new Date(clock.now()) });
  assert.is(access.payload.env, 'env-one');
  await assertProblem(await fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: bearer(tokens.access_token) }), 401, 'access_token_invalid');
});

test('pairwise actor ids: stable per Environment, different across Environments, 404 for an unknown one', async () => {
  const get = async (env: string) => alice.device.request(server.url, 'GET', `/v1/account/environments/${env}/actor`);
  const one = ((await (await get('env-one')).json()) as { actorId: string }).actorId;
  const again = ((await (await get('env-one')).json()) as { actorId: string }).actorId;
  const two = ((await (await get('env-two')).json()) as { actorId: string }).actorId;
  assert.is(one, again);
  assert.is.not(one, two);
  assert.match(one, /^act_[0-9a-hjkmnp-tv-z]{26}$/);
  await assertProblem(await get('env-none'), 404, 'environment_not_found');
  await assertProblem(await fetch(`${server.url}/v1/account/environments/env-one/actor`, { headers: bearer('project-token') }), 401, 'device_assertion_required');
});

test('CLI: loopback redirect on any port, refresh rotates, a reused refresh token revokes the whole family', async () => {
  const tokens = await cliTokens();
  assert.ok(tokens.refresh_token);
  const claims = decodeJwt(tokens.access_token);
  assert.is(claims.aud, 'registry-management');
  const one = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: tokens.refresh_token! });
  assert.is(one.status, 200);
  const next = one.body as unknown as TokenSet;
  assert.is.not(next.refresh_token, tokens.refresh_token);
  assert.is((await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(next.access_token) })).status, 200);
  // The spent token again, past the reuse grace (a retry inside it is refresh-reuse-grace.test.ts): someone else holds
  // the family. Everything of this sign-in ends.
  clock.advance(30_001);
  const reuse = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: tokens.refresh_token! });
  assert.equal([reuse.status, reuse.body.error, reuse.body.code], [400, 'invalid_grant', 'refresh_token_reused']);
  const latest = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: next.refresh_token! });
  assert.equal([latest.body.error, latest.body.code], ['invalid_grant', 'grant_revoked']);
  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(next.access_token) }), 401, 'access_token_revoked');
  // A CLI credential is not a device assertion.
  await assertProblem(await fetch(`${server.url}/v1/account/devices`, { headers: bearer(tokens.access_token) }), 401, 'device_assertion_required');
});

test('a removed device raises the account epoch: page sessions, tokens, refresh and passports stop working online', async () => {
  const bob = await enrolFirst(server.url, 'bob');
  const bobPhone = await enrolAnother(server.url, 'bob', bob.device, 'bob phone');
  const bobBrowser = new RegistryBrowser(server.url, bob.device);
  assert.is((await bobBrowser.openPageSession()).status, 204);
  const tokens = await cliTokens(bobBrowser);
  const { code, verifier } = await (async () => {
    const pair = pkcePair();
    const { location } = await bobBrowser.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pair.challenge }));
    return { code: location!.searchParams.get('code')!, verifier: pair.verifier };
  })();
  const introspect = async (passport: string) =>
    (await (await fetch(`${server.url}/v1/auth/passports/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ passport }) })).json()) as { active: boolean; reason?: string };
  assert.equal(await introspect(bob.passport), { active: true });

  assert.is((await bob.device.request(server.url, 'DELETE', `/v1/account/devices/${bobPhone.deviceId!}`)).status, 200);

  assert.equal(await introspect(bob.passport), { active: false, reason: 'account_epoch_stale' });
  assert.equal(await introspect('not.a.passport'), { active: false, reason: 'invalid' });
  assert.is((await bobBrowser.fetch(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge }))).status, 401);
  await assertProblem(await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(tokens.access_token) }), 401, 'account_epoch_stale');
  const refresh = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: tokens.refresh_token! });
  assert.equal([refresh.body.error, refresh.body.code], ['invalid_grant', 'account_epoch_stale']);
  const exchange = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.equal([exchange.body.error, exchange.body.code], ['invalid_grant', 'account_epoch_stale']);
  // A fresh page session under the new epoch works again.
  assert.is((await bobBrowser.openPageSession()).status, 204);
  assert.is((await bobBrowser.fetch(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge }))).status, 200);
  await assertProblem(await bobPhone.request(server.url, 'POST', '/v1/account/page-session'), 401, 'device_removed');
});

test('prompt=none: never for the CLI client; for an Environment only after the person agreed once', async () => {
  const carol = await enrolFirst(server.url, 'carol');
  const carolBrowser = new RegistryBrowser(server.url, carol.device);
  await carolBrowser.openPageSession();
  const silentCli = await carolBrowser.fetch(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri: 'http://127.0.0.1:40001/callback', challenge: pkcePair().challenge, prompt: 'none' }));
  assert.is(new URL(silentCli.headers.get('location')!).searchParams.get('error'), 'consent_required');
  const silentEnv = () => carolBrowser.fetch(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge, prompt: 'none' }));
  assert.is(new URL((await silentEnv()).headers.get('location')!).searchParams.get('error'), 'consent_required');
  const { location } = await carolBrowser.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge }));
  assert.ok(location?.searchParams.get('code'));
  const renewed = new URL((await silentEnv()).headers.get('location')!);
  assert.ok(renewed.searchParams.get('code'), 'silent renewal after consent');
  assert.is(renewed.searchParams.get('error'), null);
});

test('a management bearer needs the management scope; the operator listener refuses browser requests', async () => {
  const { verifier, challenge } = pkcePair();
  const redirectUri = 'http://127.0.0.1:40002/callback';
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge, scope: 'openid' }));
  const tokens = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: CLI_CLIENT_ID, code: location!.searchParams.get('code')!, redirect_uri: redirectUri, code_verifier: verifier });
  assert.is(tokens.body.scope, 'openid');
  await assertApiError(await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(String(tokens.body.access_token)) }), 403, 'insufficient_scope');
  const rebound = await fetch(`${server.opsUrl}/registry/accounts/alice/platform-admin`, {
    method: 'PUT',
    headers: { origin: 'https://evil.example', 'content-type': 'application/json', 'x-operator-name': 'x' },
    body: JSON.stringify({ reason: 'drive-by' }),
  });
  await assertApiError(rebound, 403, 'operator_host_refused');
});

test('codes expire after 60 seconds', async () => {
  const { code, verifier } = await envCode();
  clock.advance(61_000);
  const late = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.equal([late.body.error, late.body.code], ['invalid_grant', 'authorization_code_expired']);
});

test('the sweep removes spent codes and ended sessions, keeps the spent refresh tokens of live grants for reuse detection', async () => {
  const live = await cliTokens();
  await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: live.refresh_token! });
  const q = db.connection.db;
  const count = async (table: 'oauth_codes' | 'oauth_refresh_tokens' | 'oauth_grants' | 'browser_sessions') =>
    Number((await q.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);
  assert.ok((await count('oauth_codes')) > 0);
  await new AccessRecordSweep(q).run(clock.now() + 25 * 3600_000);
  assert.is(await count('oauth_codes'), 0, 'codes a day past expiry are gone');
  const liveGrant = decodeJwt(live.access_token).sid as string;
  const kept = await q.selectFrom('oauth_refresh_tokens').select('used_at').where('grant_id', '=', liveGrant).execute();
  assert.is(kept.length, 2, 'the spent token of a live grant stays, so its replay is still recognised');
  await new AccessRecordSweep(q).run(clock.now() + 61 * 24 * 3600_000);
  assert.is(await count('oauth_refresh_tokens'), 0);
  assert.is(await count('oauth_grants'), 0);
  assert.is(await count('browser_sessions'), 0);
});

test.run();
