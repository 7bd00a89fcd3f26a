import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { environmentSignIn, RuntimeClient } from '../../client/runtime-client.js';
import { loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { enrolFirst } from '../support/identity.js';
import { runtimePerson, testEnvironment } from '../support/runtime.js';
import { captureLogs } from '../support/log-capture.js';

/**
 * Credentials never reach the log, even at trace: a whole sign-in (enrolment, passport, device assertions, page session
 * cookies, OIDC code exchange, runtime and control tokens) and refusals of each credential, with every line captured.
 */
const { logger, raw: lines } = captureLogs('trace');

let db: TestDatabase;
let server: RunningServer & { url: string; opsUrl: string };

test.before(async () => {
  db = await createTestDatabase();
  const config = loadConfig({ DATABASE_URL: db.url, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1' });
  const started = await startServer(config, productParts, { logger });
  server = { ...started, url: `http://127.0.0.1:${started.port}`, opsUrl: `http://127.0.0.1:${started.opsPort}` };
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('no token, cookie, passport or device assertion of a sign-in and its refusals appears in any log line', async () => {
  const secrets = new Map<string, string>();
  const { passport, device } = await enrolFirst(server.url, 'quinn');
  secrets.set('passport', passport);
  const env = await testEnvironment(server.opsUrl, 'secret-world', 'quinn');
  const person = await runtimePerson(server, 'rowan', env);
  for (const cookie of person.browser.jar.header().split('; ')) secrets.set(`cookie ${cookie.split('=')[0]}`, cookie.slice(cookie.indexOf('=') + 1));
  const tokens = await environmentSignIn(server.url, person.browser, env.clientId, env.redirectUri);
  secrets.set('access token', tokens.access_token);
  if (tokens.id_token) secrets.set('id token', tokens.id_token);
  if (tokens.refresh_token) secrets.set('refresh token', tokens.refresh_token);

  const page = new RuntimeClient(server.url, tokens.access_token, env.origin);
  assert.is((await page.createSession()).status, 201);
  assert.is((await page.activate()).status, 200);
  const control = await page.controlToken();
  assert.is(control.status, 200, await control.clone().text());
  const controlToken = ((await control.json()) as { controlToken: string }).controlToken;
  secrets.set('control token', controlToken);

  // Refusals carrying real credentials: a device assertion used and then replayed, a token from the wrong origin, a token offered
  // as a WebSocket subprotocol to the wrong socket, cookies with a forged CSRF token.
  const assertion = await device.assertion({ method: 'GET', target: '/v1/account/devices' });
  secrets.set('device assertion', assertion);
  const uses: number[] = [];
  for (let i = 0; i < 2; i++) uses.push((await fetch(`${server.url}/v1/account/devices`, { headers: { 'platform-device-assertion': assertion } })).status);
  assert.equal(uses, [200, 401]);
  await (await fetch(`${server.url}/v1/runtime/session`, { headers: { authorization: `Bearer ${tokens.access_token}`, origin: 'https://elsewhere.example' } })).text();
  await new Promise<void>((resolve) => {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/runtime/control`, ['registry.v1.json', `registry.bearer.${tokens.access_token}`], { origin: 'https://elsewhere.example' });
    ws.on('unexpected-response', (_req, res) => (res.resume(), resolve()));
    ws.on('open', () => (ws.close(), resolve()));
    ws.on('error', () => resolve());
  });
  // And a control socket opened with it, then a refusal of the same token on another origin.
  for (const origin of [env.origin, 'https://elsewhere.example']) {
    await new Promise<void>((resolve) => {
      const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/runtime/control`, ['registry.v1.json', `registry.bearer.${controlToken}`], { origin });
      ws.on('unexpected-response', (_req, res) => (res.resume(), resolve()));
      ws.on('open', () => (ws.close(), resolve()));
      ws.on('error', () => resolve());
    });
  }
  await (await person.browser.fetch(`${server.url}/v1/auth/logout`, { method: 'POST', headers: { 'x-csrf-token': 'forged' } })).text();
  await (await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? 'none', client_id: 'someone-else' }),
  })).text();

  assert.ok(lines.length > 20, `only ${lines.length} log lines: the logger did not capture the run`);
  for (const [name, value] of secrets) {
    assert.ok(value.length >= 16, `${name} is too short to be a meaningful probe`);
    const leaked = lines.find((line) => line.includes(value));
    assert.is(leaked, undefined, `the ${name} was logged: ${leaked}`);
  }
});

test.run();
