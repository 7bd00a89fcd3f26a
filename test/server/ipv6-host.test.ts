import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestServer, type TestServer } from '../support/server.js';

/**
 * HOST set to an IPv6 address and no PUBLIC_BASE_URL: the node's own URL (the OIDC and token issuer, the OpenAPI
 * document's server) names the address in brackets, as a URL must (RFC 3986 3.2.2); `http://::1:8080` is no URL.
 */
let db: TestDatabase;
let server: TestServer;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, { HOST: '::1' });
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('the issuer and the OpenAPI server of a node listening on ::1 are http://[::1]:<port>', async () => {
  const base = `http://[::1]:${server.port}`;
  const discovery = (await (await fetch(`${base}/.well-known/openid-configuration`)).json()) as { issuer?: string; jwks_uri?: string };
  assert.is(discovery.issuer, base);
  assert.is(discovery.jwks_uri, `${base}/v1/auth/jwks`);
  const document = (await (await fetch(`${base}/v1/openapi.json`)).json()) as { servers?: Array<{ url: string }> };
  assert.equal(document.servers, [{ url: base }]);
});

test.run();
