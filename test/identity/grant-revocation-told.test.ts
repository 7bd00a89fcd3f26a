import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cliSignIn, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import type { DeviceClient } from '../../client/device-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { identityServices } from '../../identity/identity.feature.js';
import { LIVE_SESSION_CAPS } from '../../identity/live-session-caps.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Every path of OAuthGrants that revokes a grant tells the account (`onRevoked`), the notification the Runtime plane
 * turns into a sign-in check of the account's open sockets (docs/decisions.md, "Runtime socket"); the sockets' own
 * test is the code reuse in test/runtime/socket-sign-in-ends. These grants carry no socket today, so what is held here
 * is that each path tells, once, and a revocation that changed nothing does not.
 */
let server: TestServer;
let rita: { device: DeviceClient; accountId: string; browser: RegistryBrowser };
const told: string[] = [];

withTestServer(test, (started) => ({ server } = started), productParts, { REFRESH_TOKEN_REUSE_GRACE_SECONDS: '0' });
test.before(async () => {
  (await identityServices(server.services)).grants.onRevoked((accountId) => told.push(accountId));
  const { device, accountId } = await enrolFirst(server.url, 'rita-told');
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  rita = { device, accountId, browser };
});

const signIn = (): Promise<TokenSet> =>
  cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await rita.browser.authorize(url);
    await fetch(location!);
  });
const refresh = (token: string) => tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: token });
const sessionIdOf = (tokens: TokenSet): string => JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString('utf8')).sid as string;

test('refresh-token reuse revokes the sign-in and tells its account', async () => {
  const first = await signIn();
  assert.is((await refresh(first.refresh_token!)).status, 200);
  told.length = 0;
  assert.is((await refresh(first.refresh_token!)).body.code, 'refresh_token_reused');
  assert.equal(told, [rita.accountId]);
});

test('the owner revoking a CLI sign-in and a desktop session tells the account once each; revoking again tells nothing', async () => {
  const cli = await signIn();
  const other = await signIn();
  told.length = 0;
  const del = () => fetch(`${server.url}/v1/auth/management-sessions/${sessionIdOf(cli)}`, { method: 'DELETE', headers: { authorization: `Bearer ${other.access_token}` } });
  assert.is((await del()).status, 200);
  assert.equal(told, [rita.accountId]);
  assert.is((await del()).status, 200);
  assert.equal(told, [rita.accountId], 'a second revocation of a revoked sign-in tells nothing');

  const desktop = await rita.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(desktop.status, 201);
  const { sessionId } = (await desktop.json()) as { sessionId: string };
  told.length = 0;
  assert.is((await rita.device.request(server.url, 'DELETE', `/v1/account/desktop-management-sessions/${sessionId}`)).status, 200);
  assert.equal(told, [rita.accountId]);
});

test('a CLI sign-in past the cap ends the least recently used one and tells the account', async () => {
  const { device, accountId } = await enrolFirst(server.url, 'cap-told');
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  const oneMore = (): Promise<TokenSet> =>
    cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
      const { location } = await browser.authorize(url);
      await fetch(location!);
    });
  for (let i = 0; i < LIVE_SESSION_CAPS.cli; i++) await oneMore();
  told.length = 0;
  await oneMore();
  assert.equal(told, [accountId]);
});

test.run();
