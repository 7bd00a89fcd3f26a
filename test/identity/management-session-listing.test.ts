import { decodeJwt } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { cliSignIn, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolAnother, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * `GET /v1/auth/management-sessions` is "Active CLI OAuth grants of the caller". A CLI sign-in made under an
 * older account epoch no longer works (its tokens are refused online, its refresh token is refused), so it is not
 * active and must not be listed as a live session.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);

test('a CLI sign-in ended by a raised account epoch is not listed among the active management sessions', async () => {
  const bob = await enrolFirst(server.url, 'bobby');
  const phone = await enrolAnother(server.url, 'bobby', bob.device, 'bobby phone');
  const browser = new RegistryBrowser(server.url, bob.device);
  assert.is((await browser.openPageSession()).status, 204);
  const tokens = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
  const staleGrant = decodeJwt(tokens.access_token).sid as string;

  // Removing a device raises the epoch: that CLI sign-in stops working.
  assert.is((await bob.device.request(server.url, 'DELETE', `/v1/account/devices/${phone.deviceId!}`)).status, 200);
  const stale = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
  assert.is(stale.status, 401, 'the old CLI bearer is refused');

  // A fresh management identity lists the caller's sessions.
  const desktop = await bob.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  const list = (await (await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${accessToken}` } })).json()) as {
    sessions: Array<{ sessionId: string }>;
  };
  assert.equal(
    list.sessions.map((s) => s.sessionId).filter((id) => id === staleGrant),
    [],
    'a sign-in that no longer works is listed as an active CLI session',
  );
  // And indeed it does not work: its refresh is refused for the stale epoch.
  const refresh = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: tokens.refresh_token! });
  assert.is(refresh.body.code, 'account_epoch_stale');
});

test.run();
