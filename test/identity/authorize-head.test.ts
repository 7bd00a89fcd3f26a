import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * HEAD must be safe (RFC 9110 9.2.1, 9.3.2), and the authorization endpoint's GET is not: with `prompt=none` and a
 * person who agreed before, it issues a code. HEAD ran the GET handler and dropped the body, so a link checker or a
 * scanner's HEAD of an authorization URL minted a code nobody would ever see. The endpoint refuses HEAD (405, `Allow`
 * naming GET and POST only) and runs nothing.
 */
let db: TestDatabase;
let server: TestServer;
let browser: RegistryBrowser;
let clientId: string;
const REDIRECT = 'https://heady.example/cb';
withTestServer(test, (s) => ({ db, server } = s), productParts);
test.before(async () => {
  const { device } = await enrolFirst(server.url, 'heady');
  ({ clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'env-heady', origin: 'https://heady.example', ownerHandle: 'heady', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  // Agreed once, so prompt=none may answer with a code.
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's' }));
  assert.ok(location?.searchParams.get('code'), location?.href);
});

const codes = async (): Promise<number> =>
  Number((await db.connection.db.selectFrom('oauth_codes').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

test('HEAD of an authorization URL with prompt=none issues no code: 405 with Allow: GET, POST, no Location', async () => {
  const before = await codes();
  const url = authorizationUrl(server.url, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's', prompt: 'none' });
  const head = await browser.fetch(url, { method: 'HEAD' });
  assert.is(head.status, 405, `HEAD answered ${head.status} ${head.headers.get('location') ?? ''}`);
  assert.is(head.headers.get('allow'), 'GET, POST');
  assert.is(head.headers.get('location'), null);
  assert.is(await codes(), before, 'HEAD stored a code');
  // The same URL by GET is the silent answer it always was.
  const get = await browser.fetch(url);
  assert.is(get.status, 303);
  assert.ok(new URL(get.headers.get('location')!).searchParams.get('code'));
  assert.is(await codes(), before + 1);
});

test('any HEAD of the endpoint is refused alike, and a refused method names GET and POST without HEAD', async () => {
  const head = await browser.fetch(authorizationUrl(server.url, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge }), { method: 'HEAD' });
  assert.is(head.status, 405);
  const put = await browser.fetch(`${server.url}/v1/oidc/authorize`, { method: 'PUT' });
  assert.is(put.status, 405);
  assert.is(put.headers.get('allow'), 'GET, POST');
  // Every other GET operation still answers HEAD.
  const discovery = await fetch(`${server.url}/.well-known/openid-configuration`, { method: 'HEAD' });
  assert.is(discovery.status, 200);
});

test.run();
