import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 5.2, invalid_client: "If the client attempted to authenticate via the "Authorization" request header
 * field, the authorization server MUST respond with an HTTP 401 (Unauthorized) status code and include the
 * WWW-Authenticate response header field matching the authentication scheme used by the client." The registry's
 * clients are all public (`token_endpoint_auth_methods_supported: ["none"]`), so HTTP Basic always fails.
 */
let server: TestServer;
withTestServer(test, (s) => ({ server } = s), productParts);

const basic = (user: string): string => `Basic ${Buffer.from(`${user}:`).toString('base64')}`;

async function tokenCall(authorization: string | undefined, form: Record<string, string>): Promise<{ status: number; body: { error: string; code: string }; challenge: string | null }> {
  const res = await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authorization === undefined ? {} : { authorization }) },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, body: (await res.json()) as { error: string; code: string }, challenge: res.headers.get('www-authenticate') };
}

test('client authentication attempted with HTTP Basic: 401 invalid_client carries WWW-Authenticate: Basic', async () => {
  for (const scheme of ['Basic', 'basic']) {
    const res = await tokenCall(basic(CLI_CLIENT_ID).replace('Basic', scheme), { grant_type: 'refresh_token', refresh_token: 'rrt_unknown' });
    assert.is(res.status, 401);
    assert.is(res.body.error, 'invalid_client');
    assert.is(res.body.code, 'client_authentication_unsupported');
    assert.ok(res.challenge !== null && /^Basic realm="registry"$/.test(res.challenge), `WWW-Authenticate was ${String(res.challenge)}`);
  }
});

test('HTTP Basic fails even alongside a valid client_id in the form: the client asked to be authenticated a way it cannot be', async () => {
  const res = await tokenCall(basic(CLI_CLIENT_ID), { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: 'rrt_unknown' });
  assert.equal([res.status, res.body.error], [401, 'invalid_client']);
  assert.match(res.challenge ?? '', /^Basic /);
});

test('an unknown client_id without an Authorization header stays 401 invalid_client, with no challenge', async () => {
  const res = await tokenCall(undefined, { grant_type: 'refresh_token', client_id: 'nobody', refresh_token: 'rrt_unknown' });
  assert.equal([res.status, res.body.error, res.body.code], [401, 'invalid_client', 'client_unknown']);
  assert.is(res.challenge, null);
});

test.run();
