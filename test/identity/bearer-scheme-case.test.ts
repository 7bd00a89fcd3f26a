import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, cliSignIn, pkcePair, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { HttpError } from '../../transport/http/errors.js';
import { operatorVerifier } from '../../transport/ops/ops.routes.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 9110 §11.1: "It uses a case-insensitive token to identify the authentication scheme". RFC 6750 §2.1 defines the
 * `Bearer` scheme on that grammar, so `authorization: bearer <token>` (or BEARER) is the same credential as
 * `Bearer <token>`. Several HTTP stacks and proxies normalise the scheme to lower case.
 */
let server: TestServer;
let alice: { device: DeviceClient; accountId: string };
let browser: RegistryBrowser;
let cli: TokenSet;
const ORIGIN = 'https://env-case.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-case', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
  cli = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
});

test('a management bearer sent with the scheme in lower case is the same credential (RFC 9110 §11.1)', async () => {
  const upper = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `Bearer ${cli.access_token}` } });
  assert.is(upper.status, 200);
  for (const scheme of ['bearer', 'BEARER']) {
    const res = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: { authorization: `${scheme} ${cli.access_token}` } });
    assert.is(res.status, 200, `scheme "${scheme}": ${res.status} ${await res.text()}`);
  }
});

test('GET /v1/auth/me recognises a lower-case bearer scheme', async () => {
  const me = (await (await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `bearer ${cli.access_token}` } })).json()) as { authenticated: boolean };
  assert.is(me.authenticated, true, 'a valid management bearer with scheme "bearer" answered authenticated:false');
});

test('a runtime token sent with the scheme in lower case opens a Runtime session', async () => {
  const pkce = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId: envClient, redirectUri: REDIRECT, challenge: pkce.challenge, state: 's' }));
  const tokens = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: envClient, code: location!.searchParams.get('code')!, redirect_uri: REDIRECT, code_verifier: pkce.verifier });
  assert.is(tokens.status, 200);
  const res = await fetch(`${server.url}/v1/runtime/session`, { method: 'POST', headers: { authorization: `bearer ${String(tokens.body.access_token)}`, origin: ORIGIN } });
  assert.is(res.status, 201, `${res.status} ${await res.text()}`);
});

test('the operator token is matched with the scheme in any case, the token itself exactly', async () => {
  const verify = operatorVerifier('ops!token with spaces');
  const ask = async (authorization: string): Promise<string> => {
    try {
      const principal = await verify({ method: 'GET', path: '/metrics', query: '', headers: { authorization }, remoteAddress: '127.0.0.1', body: Buffer.alloc(0) }, { bodyBound: false, allowPendingDevice: false, csrf: false });
      return principal.credential;
    } catch (error) {
      if (error instanceof HttpError) return error.code;
      throw error;
    }
  };
  for (const scheme of ['Bearer', 'bearer', 'BEARER']) assert.is(await ask(`${scheme} ops!token with spaces`), 'operator', scheme);
  assert.is(await ask('Bearer OPS!TOKEN WITH SPACES'), 'operator_token_invalid');
  assert.is(await ask('Basic ops!token with spaces'), 'operator_token_invalid');
});

test.run();
