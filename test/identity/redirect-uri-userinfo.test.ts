import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * An Environment redirect URI must be on the Environment's origin. WHATWG URL leaves the userinfo out of `origin`, so
 * `https://login.bank.example@env.example/cb` passed as "on the origin" although it is no valid URL string (the URL
 * Standard has no way to write credentials in one) and shows a stranger's name first: the browser is sent there with
 * the code, and some browsers warn or refuse. The CLI's loopback check already refuses userinfo; registration must too.
 */
let server: TestServer;
let db: TestDatabase;
let browser: RegistryBrowser;
withTestServer(test, (s) => ({ server, db } = s), productParts);
test.before(async () => {
  const alice = await enrolFirst(server.url, 'alice');
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

const register = (environmentId: string, redirectUris: string[]) =>
  fetch(`${server.opsUrl}/registry/environments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'test-operator' },
    body: JSON.stringify({ environmentId, origin: 'https://env-ui.example', ownerHandle: 'alice', redirectUris }),
  });

test('a redirect URI with a user name or password is refused at registration, pointing at it', async () => {
  for (const uri of ['https://login.bank.example@env-ui.example/cb', 'https://user:secret@env-ui.example/cb', 'https://:secret@env-ui.example/cb']) {
    const res = await register('env-ui', ['https://env-ui.example/ok', uri]);
    const body = (await res.json()) as { error: { code: string; details: Array<{ pointer: string }> } };
    assert.is(res.status, 400, `${uri} answered ${res.status}: ${JSON.stringify(body)}`);
    assert.is(body.error.code, 'validation_failed');
    assert.is(body.error.details[0]?.pointer, '/redirectUris/1');
  }
});

test('the same origin without userinfo registers', async () => {
  assert.is((await register('env-ui', ['https://env-ui.example/cb'])).status, 201);
});

test('a redirect URI with userinfo registered before registration checked for it is never redirected to', async () => {
  const uri = 'https://login.bank.example@env-ui.example/cb';
  await db.connection.db
    .insertInto('oidc_clients')
    .values({ client_id: 'envc_olduserinfo', kind: 'environment', name: 'old', environment_id: 'env-ui', redirect_uris: JSON.stringify([uri]) })
    .execute();
  const res = await browser.fetch(authorizationUrl(server.url, { clientId: 'envc_olduserinfo', redirectUri: uri, challenge: pkcePair().challenge, state: 's' }));
  assert.is(res.status, 400, `answered ${res.status} ${res.headers.get('location') ?? ''}`);
  assert.match(await res.text(), 'content="redirect_uri_invalid"');
});

test.run();
