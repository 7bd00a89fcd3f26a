import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cliSignIn, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { ConfigError, loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** REFRESH_TOKEN_REUSE_GRACE_SECONDS=0 turns the grace off: a spent refresh token presented again, at once, is reuse. */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts, { REFRESH_TOKEN_REUSE_GRACE_SECONDS: '0' });

const refresh = (token: string) => tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: token });

test('grace 0: the retry of a refresh whose reply was lost revokes the sign-in', async () => {
  const { device } = await enrolFirst(server.url, 'nograce', '127.0.0.6');
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  const first = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
  const lost = await refresh(first.refresh_token!);
  assert.is(lost.status, 200);
  const retried = await refresh(first.refresh_token!);
  assert.equal([retried.status, retried.body.error, retried.body.code], [400, 'invalid_grant', 'refresh_token_reused']);
  const next = await refresh(String(lost.body.refresh_token));
  assert.equal([next.body.error, next.body.code], ['invalid_grant', 'grant_revoked']);
});

test('the token endpoint says there is no grace; the setting is 0 to 300, 30 when unset', async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, { post: { description: string } }> };
  assert.match(doc.paths['/v1/oidc/token']!.post.description, /no reuse grace/);
  assert.is(loadConfig({}).refreshTokenReuseGraceSeconds, 30);
  assert.is(loadConfig({ REFRESH_TOKEN_REUSE_GRACE_SECONDS: '300' }).refreshTokenReuseGraceSeconds, 300);
  for (const value of ['301', '-1', '']) {
    assert.throws(() => loadConfig({ REFRESH_TOKEN_REUSE_GRACE_SECONDS: value }), (e: unknown) => e instanceof ConfigError && /REFRESH_TOKEN_REUSE_GRACE_SECONDS/.test(e.message));
  }
});

test.run();
