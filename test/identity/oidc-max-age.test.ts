import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { decodeJwt } from 'jose';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * OpenID Connect Core 1.0 section 3.1.2.1, `max_age`: "If the elapsed time is greater than this value, the OP MUST
 * attempt to actively re-authenticate the End-User"; with `prompt=none` it cannot, so it answers `login_required`
 * (3.1.2.6). With `max_age` the ID token carries `auth_time`; without it, none (it would link pairwise subjects).
 */
let server: TestServer;
const clock = new ManualClock(Date.now());

/** One person per test, each signed in on its browser before any test moves the clock (device assertions are timed). */
const people = new Map<string, { browser: RegistryBrowser; clientId: string; signedInAt: number }>();

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);
test.before(async () => {
  for (const handle of ['maxine', 'maxwell', 'maxima']) {
    const { device } = await enrolFirst(server.url, handle);
    const { clientId } = await registerEnvironment(server.opsUrl, { environmentId: `env-${handle}`, origin: `https://${handle}.example`, ownerHandle: handle, redirectUris: [`https://${handle}.example/cb`] });
    const browser = new RegistryBrowser(server.url, device);
    assert.is((await browser.openPageSession()).status, 204);
    people.set(handle, { browser, clientId, signedInAt: Math.floor(clock.now() / 1000) });
  }
});

test('without prompt=none a sign-in older than max_age gets the sign-in page; a fresh one a code whose ID token carries auth_time', async () => {
  const { browser, clientId, signedInAt } = people.get('maxwell')!;
  const age = clock.now() - signedInAt * 1000;
  clock.advance(Math.max(0, 10 * 60_000 - age));
  const { verifier, challenge } = pkcePair();
  const url = (maxAge: string) => {
    const u = new URL(authorizationUrl(server.url, { clientId, redirectUri: 'https://maxwell.example/cb', challenge, state: 's' }));
    u.searchParams.set('max_age', maxAge);
    return u.href;
  };
  assert.is((await browser.fetch(url('300'))).status, 401, 'ten minutes is older than 300 s: sign in again');

  const { location } = await browser.authorize(url('3600'));
  const code = location?.searchParams.get('code');
  assert.ok(code, `max_age=3600 accepts a ten-minute-old sign-in: ${location?.href}`);
  const res = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: code!, redirect_uri: 'https://maxwell.example/cb', code_verifier: verifier });
  assert.is(res.status, 200, JSON.stringify(res.body));
  assert.is(decodeJwt(String(res.body.id_token)).auth_time, signedInAt, 'asked for max_age: the ID token says when');
});

test('prompt=none with a max_age the sign-in is older than answers login_required, not a code', async () => {
  const { browser, clientId } = people.get('maxine')!;
  // The person agreed once, so prompt=none may answer silently.
  const first = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: 'https://maxine.example/cb', challenge: pkcePair().challenge }));
  assert.ok(first.location?.searchParams.get('code'));
  // Two hours later the Environment wants a sign-in no older than five minutes.
  clock.advance(2 * 3600_000);
  const url = new URL(authorizationUrl(server.url, { clientId, redirectUri: 'https://maxine.example/cb', challenge: pkcePair().challenge, prompt: 'none', state: 's' }));
  url.searchParams.set('max_age', '300');
  const res = await browser.fetch(url.href);
  assert.is(res.status, 303);
  const back = new URL(res.headers.get('location')!);
  assert.is(back.searchParams.get('code'), null, `a code for a sign-in 2 h old despite max_age=300: ${back.href}`);
  assert.is(back.searchParams.get('error'), 'login_required');
});

test('a max_age that is not a whole number of seconds, or one no sign-in could meet (under 60 s; 0 is prompt=login), is invalid_request, sent back to the client', async () => {
  const { browser, clientId } = people.get('maxima')!;
  for (const [maxAge, code] of [['-5', 'max_age_invalid'], ['1.5', 'max_age_invalid'], ['0', 'max_age_unsupported'], ['59', 'max_age_unsupported']] as const) {
    const u = new URL(authorizationUrl(server.url, { clientId, redirectUri: 'https://maxima.example/cb', challenge: pkcePair().challenge, state: 's' }));
    u.searchParams.set('max_age', maxAge);
    const res = await browser.fetch(u.href);
    assert.is(res.status, 303, maxAge);
    const back = new URL(res.headers.get('location')!).searchParams;
    assert.equal([back.get('error'), back.get('error_description')?.includes(maxAge === '0' || maxAge === '59' ? '60 seconds' : 'whole number')], ['invalid_request', true], `${maxAge}: ${code}`);
  }
});

test.run();
