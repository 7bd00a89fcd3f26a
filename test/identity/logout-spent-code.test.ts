import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A code its browser's logout spent before anyone exchanged it is refused as what it is, `authorization_code_invalid`
 * (the browser signed out), not `authorization_code_reused`: nobody used it, and a reuse tells the client its code was
 * intercepted and replayed, an alarm an honest page racing its own logout must not raise.
 */
let server: TestServer;
const ORIGIN = 'https://env-spent.example';
const REDIRECT = `${ORIGIN}/callback`;
let envClient: string;
let device: DeviceClient;
let bearer: string;

withTestServer(test, (started) => ({ server } = started), productParts);
test.before(async () => {
  ({ device } = await enrolFirst(server.url, 'sana'));
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-spent', origin: ORIGIN, ownerHandle: 'sana', redirectUris: [REDIRECT] }));
  const first = new RegistryBrowser(server.url, device);
  assert.is((await first.openPageSession()).status, 204);
  assert.ok((await first.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge }))).location?.searchParams.get('code'));
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  bearer = ((await desktop.json()) as { accessToken: string }).accessToken;
});

/** A signed-in browser (page and console session) with `count` codes of its page session, not yet exchanged. */
async function browserWithCodes(count: number): Promise<{ codes: Array<{ code: string; verifier: string }>; logout: () => Promise<Response> }> {
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  const console = await browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
  const { csrfToken } = (await console.json()) as { csrfToken: string };
  const codes = [];
  for (let i = 0; i < count; i++) {
    const { verifier, challenge } = pkcePair();
    const authorized = await browser.fetch(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge, prompt: 'none' }));
    codes.push({ code: new URL(authorized.headers.get('location')!).searchParams.get('code')!, verifier });
  }
  return { codes, logout: () => browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': csrfToken } }) };
}

const exchange = (c: { code: string; verifier: string }) =>
  tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: c.code, redirect_uri: REDIRECT, code_verifier: c.verifier });

test('a code exchanged after its browser logged out is invalid, not reused', async () => {
  const { codes, logout } = await browserWithCodes(1);
  assert.is((await logout()).status, 200);
  const refused = await exchange(codes[0]!);
  assert.equal([refused.status, refused.body.error, refused.body.code], [400, 'invalid_grant', 'authorization_code_invalid'], JSON.stringify(refused.body));
});

test('codes exchanged while their browser logs out: each either works or is refused as invalid, never as reused', async () => {
  for (let round = 0; round < 20; round++) {
    const { codes, logout } = await browserWithCodes(4);
    const [loggedOut, ...exchanged] = await Promise.all([logout(), ...codes.map(exchange)]);
    assert.is(loggedOut!.status, 200);
    // Every exchange winning is a legal order too (three rounds in four under load): the test above forces the losing one.
    for (const res of exchanged) {
      if (res.status !== 200) assert.equal([res.body.error, res.body.code], ['invalid_grant', 'authorization_code_invalid'], `round ${round}: ${JSON.stringify(res.body)}`);
    }
  }
});

test.run();
