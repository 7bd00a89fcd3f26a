import { decodeJwt } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The pairwise actor id is "stable for that pair, unlinkable across Environments". The access token already
 * leaves out the account epoch for exactly that reason (oauth-grants.ts: "it changes at the same moment everywhere and
 * would link pairwise ids"). The ID token's `auth_time` is the page session's start, to the second, and the same for
 * every Environment the person enters from that browser: two Environments comparing ID tokens link the two actor ids.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);

test('ID tokens of two Environments carry nothing shared that links their pairwise subjects', async () => {
  const alice = await enrolFirst(server.url, 'alicia');
  const one = await registerEnvironment(server.opsUrl, { environmentId: 'env-a', origin: 'https://a.example', ownerHandle: 'alicia', redirectUris: ['https://a.example/cb'] });
  const two = await registerEnvironment(server.opsUrl, { environmentId: 'env-b', origin: 'https://b.example', ownerHandle: 'alicia', redirectUris: ['https://b.example/cb'] });
  const browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
  const idToken = async (clientId: string, redirectUri: string, after: number) => {
    clock.advance(after);
    const { verifier, challenge } = pkcePair();
    const { location } = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri, challenge, state: 's' }));
    const res = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: location!.searchParams.get('code')!, redirect_uri: redirectUri, code_verifier: verifier });
    assert.is(res.status, 200, JSON.stringify(res.body));
    return decodeJwt(String(res.body.id_token));
  };
  // Minutes apart, in two Environments that never talk to the registry about each other.
  const a = await idToken(one.clientId, 'https://a.example/cb', 0);
  const b = await idToken(two.clientId, 'https://b.example/cb', 7 * 60_000);
  assert.is.not(a.sub, b.sub, 'pairwise subjects differ');
  assert.ok(
    a.auth_time === undefined || a.auth_time !== b.auth_time,
    `both ID tokens carry auth_time ${String(a.auth_time)}: the same second links ${String(a.sub)} and ${String(b.sub)}`,
  );
});

test.run();
