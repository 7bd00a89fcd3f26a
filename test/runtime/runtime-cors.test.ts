import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { launchChromium, type ChromiumHandle } from '../support/chromium.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { assertProblem, registerEnvironment } from '../support/identity.js';
import { runtimePerson, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * The Runtime's browser calls are cross-origin: an Environment's page calls the registry. Preflights and responses
 * allow exactly the origins of registered Environments, in a real Chromium and at the HTTP level.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let browser: ChromiumHandle;
let pages: Server[];
let env: TestEnvironment;
let strangerOrigin: string;
let cora: RuntimePerson;

/** Serves an empty page, so a browser page has this origin. */
async function pageServer(): Promise<{ server: Server; origin: string }> {
  const page = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>page</title>'));
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  return { server: page, origin: `http://127.0.0.1:${(page.address() as AddressInfo).port}` };
}

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts);
  const [home, stranger] = await Promise.all([pageServer(), pageServer()]);
  pages = [home.server, stranger.server];
  strangerOrigin = stranger.origin;
  const redirectUri = `${home.origin}/callback`;
  cora = await runtimePerson(server, 'cora');
  const { clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'cors-world', origin: home.origin, ownerHandle: 'cora', redirectUris: [redirectUri] });
  env = { environmentId: 'cors-world', origin: home.origin, clientId, redirectUri };
  browser = await launchChromium();
});
test.after(async () => {
  await browser?.close();
  for (const page of pages ?? []) await new Promise((resolve) => page.close(resolve));
  await server?.stop('test over');
  await db?.drop();
});

const preflight = (origin: string, method: string, headers: string) =>
  fetch(`${server.url}/v1/runtime/session`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });

test('preflight: allowed for the Environment\'s origin and its desktop world, refused for a stranger', async () => {
  const allowed = await preflight(env.origin, 'GET', 'authorization, x-platform-runtime-session');
  assert.is(allowed.status, 204);
  assert.is(allowed.headers.get('access-control-allow-origin'), env.origin);
  assert.is(allowed.headers.get('access-control-allow-methods'), 'POST, GET, HEAD');
  assert.match(allowed.headers.get('access-control-allow-headers') ?? '', /x-platform-runtime-session/);
  assert.is(allowed.headers.get('access-control-allow-credentials'), null, 'bearer tokens only: no cookie rides along');
  assert.is(allowed.headers.get('vary'), 'origin');
  const world = await preflight('platform-env://cors-world', 'POST', 'authorization');
  assert.is(world.headers.get('access-control-allow-origin'), 'platform-env://cors-world');

  const refused = await preflight(strangerOrigin, 'GET', 'authorization');
  assert.is(refused.headers.get('access-control-allow-origin'), null);
  await assertProblem(refused, 403, 'cors_origin_not_allowed');
  await assertProblem(await preflight('platform-env://nowhere', 'GET', 'authorization'), 403, 'cors_origin_not_allowed');
  // Nothing that could not be registered is looked up or remembered: not a variant of a registered origin, not a
  // 60 KB one (each would otherwise sit in the refusal table).
  for (const origin of [`${env.origin}/`, env.origin.toUpperCase(), 'null', `https://${'a'.repeat(60_000)}.example`]) {
    await assertProblem(await preflight(origin, 'GET', 'authorization'), 403, 'cors_origin_not_allowed');
  }
  // Not a preflight: a plain OPTIONS says what the path allows.
  const plain = await fetch(`${server.url}/v1/runtime/session`, { method: 'OPTIONS' });
  assert.equal([plain.status, plain.headers.get('allow')], [204, 'POST, GET, HEAD']);
  // Paths no page calls cross-origin keep their 405.
  assert.is((await fetch(`${server.url}/v1/enrol/start`, { method: 'OPTIONS', headers: { origin: env.origin, 'access-control-request-method': 'POST' } })).status, 405);
});

test('an origin refused before its Environment is registered is allowed as soon as it is, and its world too', async () => {
  const late = await pageServer();
  pages.push(late.server);
  await assertProblem(await preflight(late.origin, 'POST', 'authorization'), 403, 'cors_origin_not_allowed');
  await assertProblem(await preflight('platform-env://late-world', 'POST', 'authorization'), 403, 'cors_origin_not_allowed');
  await registerEnvironment(server.opsUrl, { environmentId: 'late-world', origin: late.origin, ownerHandle: 'cora', redirectUris: [`${late.origin}/callback`] });
  assert.is((await preflight(late.origin, 'POST', 'authorization')).status, 204);
  assert.is((await preflight('platform-env://late-world', 'POST', 'authorization')).status, 204);
});

test('a page of the Environment creates and reads its session; a refusal is readable too; a stranger\'s page is blocked', async () => {
  const token = await cora.token(env);
  const page = await browser.newPage();
  await page.goto(`${env.origin}/`);
  const seen = await page.evaluate(async ({ registry, token }) => {
    const created = await fetch(`${registry}/v1/runtime/session`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    const session = (await created.json()) as { sessionId: string; status: string };
    // Custom headers: preflighted.
    const read = await fetch(`${registry}/v1/runtime/session`, { headers: { authorization: `Bearer ${token}`, 'x-platform-runtime-session': session.sessionId } });
    const refusal = (await read.json()) as { code: string };
    const badToken = await fetch(`${registry}/v1/runtime/session`, { method: 'POST', headers: { authorization: 'Bearer nope' } });
    return {
      created: [created.status, session.status, created.headers.get('x-request-id')?.startsWith('req_')],
      read: [read.status, refusal.code],
      badToken: [badToken.status, ((await badToken.json()) as { code: string }).code, badToken.headers.get('www-authenticate') !== null],
    };
  }, { registry: server.url, token });
  assert.equal(seen.created, [201, 'standby', true]);
  assert.equal(seen.read, [409, 'runtime_session_standby']);
  assert.equal(seen.badToken, [401, 'runtime_token_invalid', true]);

  const stranger = await browser.newPage();
  await stranger.goto(`${strangerOrigin}/`);
  const blocked = await stranger.evaluate(async ({ registry, token }) => {
    try {
      await fetch(`${registry}/v1/runtime/session`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      return 'answered';
    } catch (error) {
      return error instanceof TypeError ? 'blocked' : String(error);
    }
  }, { registry: server.url, token });
  assert.is(blocked, 'blocked');
  await Promise.all([page.close(), stranger.close()]);
});

test.run();
