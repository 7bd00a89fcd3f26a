import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cliSignIn, RegistryBrowser } from '../../client/oidc-client.js';
import { environmentSignIn } from '../../client/runtime-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { startTestServer } from '../support/server.js';

/**
 * The CLI and Environment sign-ins ask for `openid` and send a nonce, so a token response without an ID token (from
 * an on-path or mixed-up token endpoint, as in sign-in-checks.test.ts) is refused: accepting it would skip every check
 * the ID token carries (signature, iss, aud, exp, nonce).
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
const ORIGIN = 'https://idless-world.example';
const REDIRECT = `${ORIGIN}/callback`;
let envClient: string;
let browser: RegistryBrowser;
let proxy: Server;
let proxyUrl: string;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, { RUNTIME_EVICTIONS_PER_MINUTE: '1000' });
  const { device } = await enrolFirst(server.url, 'idless');
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'idless-world', origin: ORIGIN, ownerHandle: 'idless', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  // Passes everything through to the registry, except that the token endpoint's answer loses its id_token.
  proxy = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const upstream = await fetch(`${server.url}${req.url}`, req.method === 'POST' ? { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body } : {});
    const json = (await upstream.json()) as Record<string, unknown>;
    if (req.url?.startsWith('/v1/oidc/token')) delete json.id_token;
    res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
test.after(async () => {
  proxy.close();
  await server.stop('test over');
  await db.drop();
});

const settled = <T>(p: Promise<T>) => p.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error: error as Error }));

test('cliSignIn asked for openid: a token response without an ID token is refused, not accepted unchecked', async () => {
  const result = await settled(
    cliSignIn(proxyUrl, CLI_CLIENT_ID, async (url) => {
      assert.ok(new URL(url).searchParams.get('scope')?.split(' ').includes('openid'));
      const { location } = await browser.authorize(url.replace(proxyUrl, server.url));
      await fetch(location!);
    }),
  );
  assert.not.ok(result.ok, `accepted tokens (scope "${result.ok ? result.value.scope : ''}") with no ID token: the nonce was never checked`);
});

test('environmentSignIn (openid by default): a token response without an ID token is refused', async () => {
  // The person's browser walks the real registry; only the Environment's own calls go through the proxy.
  const viaRegistry = { authorize: (url: string) => browser.authorize(url.replace(proxyUrl, server.url)) } as unknown as RegistryBrowser;
  const result = await settled(environmentSignIn(proxyUrl, viaRegistry, envClient, REDIRECT));
  assert.not.ok(result.ok, `accepted tokens (scope "${result.ok ? result.value.scope : ''}") with no ID token: the nonce was never checked`);
});

test.run();
