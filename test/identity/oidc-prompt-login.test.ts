import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { decodeJwt } from 'jose';
import { ManualClock } from '../../actors/clock.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * OpenID Connect Core 1.0 3.1.2.1, `prompt=login`: "The Authorization Server SHOULD prompt the End-User for
 * reauthentication." It was answered `invalid_request`, so a client asking for a fresh sign-in got none at all. The
 * registry re-authenticates the way `max_age` does, with the shortest bound a person can meet (60 s: sign in with the
 * desktop app, reload): an older sign-in gets the sign-in page, a fresh one the consent page, and the ID token says
 * when (`auth_time`). `none` with another value is invalid (3.1.2.1).
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let browser: RegistryBrowser;
let clientId: string;
const REDIRECT = 'https://relogin.example/cb';

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);
test.before(async () => {
  const { device } = await enrolFirst(server.url, 'relogin');
  device.now = () => clock.now();
  ({ clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'env-relogin', origin: 'https://relogin.example', ownerHandle: 'relogin', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
});

const url = (prompt: string, challenge = pkcePair().challenge): string =>
  authorizationUrl(server.url, { clientId, redirectUri: REDIRECT, challenge, state: 's', nonce: 'n', prompt });

test('prompt=login with a sign-in ten minutes old shows the sign-in page; a sign-in made then gets a code whose ID token says when', async () => {
  clock.advance(10 * 60_000);
  const stale = await browser.fetch(url('login'));
  assert.is(stale.status, 401, `a ten-minute-old sign-in answered ${stale.status} ${stale.headers.get('location') ?? ''}`);
  assert.match(await stale.text(), /content="page_session_required"/);

  // The person signs in again with the desktop app and reloads.
  assert.is((await browser.openPageSession()).status, 204);
  const signedInAt = Math.floor(clock.now() / 1000);
  clock.advance(5_000);
  const { verifier, challenge } = pkcePair();
  const { location, response } = await browser.authorize(url('login', challenge));
  const code = location?.searchParams.get('code');
  assert.ok(code, `a fresh sign-in with prompt=login: ${response.status} ${location?.href ?? ''}`);
  const tokens = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: code!, redirect_uri: REDIRECT, code_verifier: verifier });
  assert.is(tokens.status, 200, JSON.stringify(tokens.body));
  assert.is(decodeJwt(String(tokens.body.id_token)).auth_time, signedInAt);
});

test('prompt=login consent is one request for both; prompt=none with another value is invalid_request, sent back to the client', async () => {
  assert.is((await browser.openPageSession()).status, 204);
  assert.is((await browser.fetch(url('login consent'))).status, 200);
  for (const prompt of ['none login', 'consent none']) {
    const res = await browser.fetch(url(prompt));
    assert.is(res.status, 303, prompt);
    const back = new URL(res.headers.get('location')!).searchParams;
    assert.equal([back.get('error'), back.get('code')], ['invalid_request', null], prompt);
  }
});

test('the consent form of a prompt=login request posted once the sign-in is older than the bound: login_required, no code', async () => {
  assert.is((await browser.openPageSession()).status, 204);
  const page = await browser.fetch(url('login'));
  assert.is(page.status, 200);
  const form = new URLSearchParams();
  for (const [, name, value] of (await page.text()).matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.set(name!, value!);
  form.set('decision', 'allow');
  clock.advance(2 * 60_000);
  const posted = await browser.fetch(`${server.url}/v1/oidc/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
    body: form.toString(),
  });
  assert.is(posted.status, 303);
  const back = new URL(posted.headers.get('location')!).searchParams;
  assert.equal([back.get('error'), back.get('code')], ['login_required', null]);
});

test.run();
