import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { tokenRequest } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 3.1: "Parameters sent without a value MUST be treated as if they were omitted from the request." An empty
 * `grant_type` is a missing one (`invalid_request`, as when it is left out), not a grant type the registry does not
 * support (`unsupported_grant_type`).
 */
let server: TestServer;
withTestServer(test, (s) => ({ server } = s), productParts);

test('an empty grant_type is answered as a missing one: invalid_request', async () => {
  const omitted = await tokenRequest(server.url, { client_id: CLI_CLIENT_ID, refresh_token: 'x' });
  assert.equal([omitted.status, omitted.body.error], [400, 'invalid_request']);
  const empty = await tokenRequest(server.url, { grant_type: '', client_id: CLI_CLIENT_ID, refresh_token: 'x' });
  assert.equal([empty.status, empty.body.error, empty.body.code], [400, 'invalid_request', 'grant_type_required']);
});

test('empty parameters of a known grant type are missing ones too', async () => {
  const res = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: '' });
  assert.equal([res.status, res.body.error, res.body.code], [400, 'invalid_request', 'token_request_incomplete']);
});

test.run();
