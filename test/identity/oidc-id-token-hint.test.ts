import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * OpenID Connect Core 1.0 section 3.1.2.1, `id_token_hint` with `prompt=none`: "If the End-User identified by the ID
 * Token is logged in or is logged in by the request, then the Authorization Server returns a positive response;
 * otherwise, it SHOULD return an error, such as login_required." A client renewing silently names whom it expects;
 * another person signed in on this browser since must not hand it a code for themselves. The hint is an ID token this
 * registry issued to that client, usually past its short life by the time the client renews: any age is taken.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
const ONE = 'https://hint-one.example';
const TWO = 'https://hint-two.example';
let clientOne: string;
let clientTwo: string;
const people = new Map<string, { browser: RegistryBrowser; idTokens: Map<string, string>; accessToken: string }>();

withTestServer(test, (s) => ({ server } = s), productParts, {}, clock);
test.before(async () => {
  for (const handle of ['hinta', 'hintb']) {
    const { device } = await enrolFirst(server.url, handle);
    const browser = new RegistryBrowser(server.url, device);
    assert.is((await browser.openPageSession()).status, 204);
    people.set(handle, { browser, idTokens: new Map(), accessToken: '' });
  }
  ({ clientId: clientOne } = await registerEnvironment(server.opsUrl, { environmentId: 'hint-one', origin: ONE, ownerHandle: 'hinta', redirectUris: [`${ONE}/cb`] }));
  ({ clientId: clientTwo } = await registerEnvironment(server.opsUrl, { environmentId: 'hint-two', origin: TWO, ownerHandle: 'hinta', redirectUris: [`${TWO}/cb`] }));
  // Each person agrees once to each client, which is what lets prompt=none answer with a code.
  for (const person of people.values()) {
    for (const [clientId, origin] of [[clientOne, ONE], [clientTwo, TWO]] as const) {
      const { verifier, challenge } = pkcePair();
      const { location } = await person.browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: `${origin}/cb`, challenge, nonce: 'n' }));
      const code = location?.searchParams.get('code');
      assert.ok(code, location?.href);
      const res = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: code!, redirect_uri: `${origin}/cb`, code_verifier: verifier });
      assert.is(res.status, 200, JSON.stringify(res.body));
      person.idTokens.set(clientId, String(res.body.id_token));
      person.accessToken = String(res.body.access_token);
    }
  }
});

/** A silent renewal at client one from `who`'s browser, with `hint`; where it is sent back to. */
async function silent(who: string, hint: string | undefined, extra = ''): Promise<URLSearchParams> {
  const url = new URL(authorizationUrl(server.url, { clientId: clientOne, redirectUri: `${ONE}/cb`, challenge: pkcePair().challenge, state: 's1', prompt: 'none' }));
  if (hint !== undefined) url.searchParams.set('id_token_hint', hint);
  const res = await people.get(who)!.browser.fetch(url.href + extra);
  assert.is(res.status, 303, `expected a redirect; got ${res.status}`);
  const back = new URL(res.headers.get('location')!);
  assert.is(back.origin + back.pathname, `${ONE}/cb`);
  assert.is(back.searchParams.get('iss'), server.url);
  return back.searchParams;
}

test('a hint naming the person signed in: a code, as without one', async () => {
  const back = await silent('hinta', people.get('hinta')!.idTokens.get(clientOne));
  assert.ok(back.get('code'), back.toString());
  assert.ok((await silent('hinta', undefined)).get('code'));
});

test('a hint naming someone else than the person signed in: login_required, no code', async () => {
  const back = await silent('hinta', people.get('hintb')!.idTokens.get(clientOne));
  assert.is(back.get('error'), 'login_required');
  assert.is(back.get('code'), null);
  assert.is(back.get('state'), 's1');
});

test('a hint that is no ID token this registry issued to this client: invalid_request', async () => {
  const { idTokens, accessToken } = people.get('hinta')!;
  const [header, payload] = idTokens.get(clientOne)!.split('.');
  for (const hint of ['not-a-token', idTokens.get(clientTwo)!, accessToken, `${header}.${payload}.${'A'.repeat(86)}`]) {
    const back = await silent('hinta', hint);
    assert.is(back.get('error'), 'invalid_request', hint.slice(0, 40));
    assert.is(back.get('code'), null);
  }
});

test('an expired hint still names the person: a code', async () => {
  clock.advance(60 * 60_000);
  const back = await silent('hinta', people.get('hinta')!.idTokens.get(clientOne));
  assert.ok(back.get('code'), back.toString());
});

test('a repeated id_token_hint: invalid_request', async () => {
  const hint = people.get('hinta')!.idTokens.get(clientOne)!;
  const back = await silent('hinta', hint, `&id_token_hint=${hint}`);
  assert.is(back.get('error'), 'invalid_request');
  assert.match(back.get('error_description') ?? '', 'id_token_hint');
});

test.run();
