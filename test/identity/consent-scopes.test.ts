import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The consent page asks the person to agree to exactly what the client gets: every scope the request names is shown
 * on it (the form posts them back as they are, and the grant carries them). It said only "asks to know you as
 * @handle", so a person agreeing to the CLI's sign-in handed over management of their account without being told.
 */
let server: TestServer;
let browser: RegistryBrowser;
const ORIGIN = 'https://env-consent.example';
const REDIRECT = `${ORIGIN}/cb`;
let envClient: string;

withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  const alice = await enrolFirst(server.url, 'alice');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'env-consent', origin: ORIGIN, ownerHandle: 'alice', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

async function consent(clientId: string, redirectUri: string, scope?: string): Promise<{ text: string; posted: string }> {
  const res = await browser.fetch(authorizationUrl(server.url, { clientId, redirectUri, challenge: pkcePair().challenge, ...(scope === undefined ? {} : { scope }) }));
  assert.is(res.status, 200);
  const html = await res.text();
  const posted = /<input type="hidden" name="scope" value="([^"]*)">/.exec(html)?.[1] ?? '';
  // What the person reads: the page without its form's hidden fields.
  return { text: html.replace(/<input type="hidden"[^>]*>/g, ''), posted };
}

test('the CLI consent page says that it grants management of the account, and only when management is asked for', async () => {
  const full = await consent(CLI_CLIENT_ID, 'http://127.0.0.1:4567/callback', 'openid management');
  assert.is(full.posted, 'openid management');
  assert.match(full.text, /data-scope="management"/, 'the management scope the form grants is not shown');
  assert.match(full.text, /data-scope="openid"/);
  const narrow = await consent(CLI_CLIENT_ID, 'http://127.0.0.1:4567/callback', 'openid');
  assert.not.match(narrow.text, /data-scope="management"/);
});

test('an Environment consent page shows each scope it grants, the default (no scope parameter) included', async () => {
  for (const scope of [undefined, 'openid runtime', 'runtime']) {
    const page = await consent(envClient, REDIRECT, scope);
    for (const granted of page.posted.split(' ')) assert.match(page.text, new RegExp(`data-scope="${granted}"`), `${String(scope)}: ${granted} not shown`);
    assert.is(page.text.match(/data-scope="/g)?.length, page.posted.split(' ').length);
  }
});

test.run();
