import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { authorizationUrl, pkcePair, RegistryBrowser } from '../../client/oidc-client.js';
import { isLoopbackRedirect } from '../../identity/authorization-request.js';
import { CLI_CLIENT_ID, CLI_REDIRECT_URIS } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6749 3.1.2: "The endpoint URI MUST NOT include a fragment component." `…/cb#` has an (empty) fragment
 * component: WHATWG URL reports `hash === ''` for it while `href` keeps the `#`, so a `hash` check lets it through
 * and the code would be issued to `…/cb?code=…&iss=…#`. Both the CLI's loopback check and Environment registration
 * must see it.
 */
let server: TestServer;
let browser: RegistryBrowser;
let alice: { device: DeviceClient };
withTestServer(test, (s) => ({ server } = s), productParts);
test.before(async () => {
  alice = await enrolFirst(server.url, 'alice');
  browser = new RegistryBrowser(server.url, alice.device);
  assert.is((await browser.openPageSession()).status, 204);
});

test('isLoopbackRedirect refuses an empty or non-empty fragment, on either loopback literal', () => {
  for (const uri of ['http://127.0.0.1:5000/callback#', 'http://127.0.0.1:5000/callback#x', 'http://[::1]:5000/callback#', 'http://127.0.0.1:5000#']) {
    assert.is(isLoopbackRedirect(uri, CLI_REDIRECT_URIS), false, uri);
  }
  assert.is(isLoopbackRedirect('http://127.0.0.1:5000/callback', CLI_REDIRECT_URIS), true);
});

test('a CLI redirect URI with a fragment component (even empty) is refused with the error page, never redirected to', async () => {
  for (const redirectUri of ['http://127.0.0.1:5000/callback#', 'http://[::1]:5000/callback#']) {
    const res = await browser.fetch(authorizationUrl(server.url, { clientId: CLI_CLIENT_ID, redirectUri, challenge: pkcePair().challenge, state: 's' }));
    assert.is(res.status, 400, `${redirectUri} answered ${res.status} ${res.headers.get('location') ?? ''}`);
    assert.match(await res.text(), 'content="redirect_uri_invalid"');
  }
});

test('an Environment redirect URI with a fragment, even an empty one, is refused at registration', async () => {
  for (const uri of ['https://frag.example/cb#', 'https://frag.example/cb#x']) {
    const res = await fetch(`${server.opsUrl}/registry/environments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-operator-name': 'test-operator' },
      body: JSON.stringify({ environmentId: 'env-frag', origin: 'https://frag.example', ownerHandle: 'alice', redirectUris: ['https://frag.example/ok', uri] }),
    });
    const body = (await res.json()) as { error: { code: string; details: Array<{ pointer: string }> } };
    assert.is(res.status, 400, `${uri} answered ${res.status}: ${JSON.stringify(body)}`);
    assert.is(body.error.code, 'validation_failed');
    assert.is(body.error.details[0]?.pointer, '/redirectUris/1');
  }
});

test.run();
