import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, cliSignIn, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 4.1.2.1 and 5.2: `error_description` "MUST NOT include characters outside the set %x20-21 / %x23-5B /
 * %x5D-7E" (printable ASCII without `"` and `\`). A description that echoes what the request sent (an unknown scope,
 * a repeated parameter's name) must not carry the request's other characters to the client: some clients show the
 * description, which then says whatever a third party put in the link.
 */
let server: TestServer;
let alice: { device: DeviceClient; accountId: string };
let browser: RegistryBrowser;
const ORIGIN = 'https://env-ed.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;
const ALLOWED = /^[\x20\x21\x23-\x5B\x5D-\x7E]*$/;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-ed', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

test('an unknown scope echoed in the redirect keeps error_description to the RFC 6749 character set', async () => {
  const url = authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's', scope: 'openid "Your\\account\u00a0is\u00a0locked:\u00a0call\u00a0+1\u00a0555"' });
  const res = await browser.fetch(url);
  assert.is(res.status, 303);
  const back = new URL(res.headers.get('location')!).searchParams;
  assert.is(back.get('error'), 'invalid_scope');
  const description = back.get('error_description') ?? '';
  assert.ok(description.length > 0);
  assert.ok(ALLOWED.test(description), `error_description outside the RFC 6749 set: ${JSON.stringify(description)}`);
});

test('a refresh naming scopes beyond the grant keeps error_description to the RFC 6749 character set', async () => {
  const tokens = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
  const res = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: tokens.refresh_token!, scope: 'openid management "é\\' });
  assert.equal([res.status, res.body.error, res.body.code], [400, 'invalid_scope', 'scope_exceeds_grant']);
  assert.ok(ALLOWED.test(String(res.body.error_description)), `error_description outside the RFC 6749 set: ${JSON.stringify(res.body.error_description)}`);
});

test('a repeated form parameter named with quotes keeps error_description to the RFC 6749 character set', async () => {
  const res = await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `grant_type=authorization_code&${encodeURIComponent('x"é')}=1&${encodeURIComponent('x"é')}=2`,
  });
  const body = (await res.json()) as Record<string, unknown>;
  assert.equal([res.status, body.error], [400, 'invalid_request']);
  assert.ok(ALLOWED.test(String(body.error_description)), `error_description outside the RFC 6749 set: ${JSON.stringify(body.error_description)}`);
});

test.run();
