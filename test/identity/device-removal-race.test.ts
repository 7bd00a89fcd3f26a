import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolAnother, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A device being removed never comes away with material that outlives its removal: the desktop management session and
 * the page session are bound to the account epoch read together with the device's status, so a request that passed its
 * device check just before the removal gets a session the removal (which raises the epoch) ends. Bound to an epoch read
 * afterwards, such sessions survived it: a stolen laptop could keep a management bearer or a page session.
 */
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), productParts);

test('a desktop management session requested by a device while it is being removed does not work after the removal', async () => {
  const survivors: string[] = [];
  const { device: owner } = await enrolFirst(server.url, 'owner', '127.0.0.2');
  for (let round = 0; round < 6 && survivors.length === 0; round++) {
    const stolen = await enrolAnother(server.url, 'owner', owner, 'stolen laptop');
    // The thief keeps asking for desktop sessions; the owner removes the laptop meanwhile.
    const asks: Array<Promise<Response>> = [];
    let removal: Promise<Response> | undefined;
    for (let i = 0; i < 60; i++) {
      asks.push(stolen.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {}));
      if (i === 30) removal = owner.request(server.url, 'DELETE', `/v1/account/devices/${stolen.deviceId!}`);
      await new Promise((r) => setImmediate(r));
    }
    assert.is((await removal!).status, 200);
    for (const res of await Promise.all(asks)) {
      if (res.status !== 201) continue;
      const { accessToken } = (await res.json()) as { accessToken: string };
      // After the removal, every bearer the removed device obtained must be refused.
      const check = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${accessToken}` } });
      if (check.status === 200) survivors.push(accessToken);
    }
  }
  assert.is(survivors.length, 0, `${survivors.length} management bearer(s) of the removed device still work after its removal`);
});

test('a page session opened by a device while it is being removed does not work after the removal', async () => {
  let survivors = 0;
  const { device: owner } = await enrolFirst(server.url, 'pgowner', '127.0.0.3');
  for (let round = 0; round < 6 && survivors === 0; round++) {
    const stolen = await enrolAnother(server.url, 'pgowner', owner, 'stolen laptop');
    const browsers: RegistryBrowser[] = [];
    const opens: Array<Promise<Response>> = [];
    let removal: Promise<Response> | undefined;
    for (let i = 0; i < 60; i++) {
      const browser = new RegistryBrowser(server.url, stolen);
      browsers.push(browser);
      opens.push(browser.openPageSession());
      if (i === 30) removal = owner.request(server.url, 'DELETE', `/v1/account/devices/${stolen.deviceId!}`);
      await new Promise((r) => setImmediate(r));
    }
    assert.is((await removal!).status, 200);
    await Promise.all(opens);
    for (const browser of browsers) {
      // With a live page session the authorization page offers consent (200), e.g. for a 30-day CLI sign-in.
      const page = await browser.fetch(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri: 'http://127.0.0.1:45000/callback', challenge: pkcePair().challenge }));
      if (page.status === 200) survivors++;
    }
  }
  assert.is(survivors, 0, `${survivors} page session(s) of the removed device still sign in after its removal`);
});

test.run();
