import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { DeviceClient } from '../../client/device-client.js';
import { cliSignIn, RegistryBrowser } from '../../client/oidc-client.js';
import { environmentSignIn, RuntimeClient } from '../../client/runtime-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { registerEnvironment, startEnrolment } from '../support/identity.js';
import { startTestServer } from '../support/server.js';

/**
 * The clients of client/: what the CLI and Environment sign-ins verify on the way back (state, iss, nonce, ID token), how
 * a denied CLI sign-in ends, and what a RuntimeClient believes it holds after create/release.
 *
 * The server's clock runs 30 minutes behind the client's (a skewed server, self-consistent on its side): every ID
 * token it issues has expired by the client's clock.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
const SKEW_MS = 30 * 60_000;
const clock = new ManualClock(Date.now() - SKEW_MS);
const ORIGIN = 'https://audit-world.example';
const REDIRECT = `${ORIGIN}/callback`;
let envClient: string;
let browser: RegistryBrowser;
/** For the checks that are not about clocks: the client reads the time the (skewed) server keeps. */
const serverClock = { now: () => clock.now() };

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);

test.before(async () => {
  process.on('unhandledRejection', onUnhandled);
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, { RUNTIME_EVICTIONS_PER_MINUTE: '1000' }, clock);
  // Enrol by hand so the device signs with the server's (skewed) clock.
  const device = await DeviceClient.generate('audit laptop');
  device.now = () => clock.now();
  const started = await startEnrolment(server.url, 'auditor', device);
  const done = await device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });
  assert.is(done.status, 201, await done.clone().text());
  ({ clientId: envClient } = await registerEnvironment(server.opsUrl, { environmentId: 'audit-world', origin: ORIGIN, ownerHandle: 'auditor', redirectUris: [REDIRECT] }));
  browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
});
test.after(async () => {
  process.off('unhandledRejection', onUnhandled);
  await server.stop('test over');
  await db.drop();
});

const settled = <T>(p: Promise<T>) => p.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error: error as Error }));

test('cliSignIn: a denied sign-in rejects cliSignIn, without an unhandled rejection (which crashes a CLI)', async () => {
  unhandled.length = 0;
  const result = await settled(
    cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
      const { location } = await browser.authorize(url, 'deny');
      assert.is(location?.searchParams.get('error'), 'access_denied');
      await fetch(location!);
    }, serverClock),
  );
  assert.not.ok(result.ok, 'a denied sign-in must fail');
  assert.match((result as { error: Error }).error.message, /access_denied/);
  assert.equal(
    unhandled.map((r) => String((r as Error).message ?? r)),
    [],
    'the callback rejected the code promise while openBrowser was still running: Node reports it as unhandled and, by default, exits',
  );
});

test('cliSignIn: a stray request to the loopback /callback (no state) does not abort the sign-in in progress', async () => {
  unhandled.length = 0;
  const result = await settled(
    cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
      // Any local process (or a reloaded old tab) can reach the listener while the person is on the consent page.
      const listener = new URL(new URL(url).searchParams.get('redirect_uri')!);
      await fetch(listener);
      const { location } = await browser.authorize(url);
      await fetch(location!);
    }, serverClock),
  );
  assert.ok(result.ok, `the real redirect was never waited for: ${result.ok ? '' : result.error.message}; unhandled: ${unhandled.length}`);
});

test('cliSignIn: a redirect whose `iss` is not this registry (RFC 9207 mix-up) is refused', async () => {
  const result = await settled(
    cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
      const { location } = await browser.authorize(url);
      assert.is(location?.searchParams.get('iss'), server.url, 'the registry sends its issuer');
      location!.searchParams.set('iss', 'https://attacker.example');
      await fetch(location!);
    }, serverClock),
  );
  assert.not.ok(result.ok, `accepted a code from issuer https://attacker.example`);
  assert.match((result as { error: Error }).error.message, /issuer https:\/\/attacker\.example/);
});

test('cliSignIn: asks for openid, so it sends a nonce to bind the ID token to this sign-in', async () => {
  let opened = '';
  await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    opened = url;
    const { location } = await browser.authorize(url);
    await fetch(location!);
  }, serverClock);
  const params = new URL(opened).searchParams;
  assert.ok(params.get('scope')?.split(' ').includes('openid'));
  assert.ok(params.get('nonce'), `no nonce in ${opened}`);
});

test('cliSignIn: an ID token that has expired by the client clock is refused (server clock 30 min behind)', async () => {
  const result = await settled(
    cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
      const { location } = await browser.authorize(url);
      await fetch(location!);
    }),
  );
  assert.not.ok(result.ok, result.ok ? `returned an ID token that expired ${Math.round((Date.now() - decodeJwt(result.value.id_token!).exp! * 1000) / 1000)} s ago` : '');
  assert.match((result as { error: Error }).error.message, /"exp" claim/);
});

test('cliSignIn: an ID token issued to another client (aud ≠ CLI client) is refused', async () => {
  // A real ID token of this registry, for the Environment client.
  const foreign = (await environmentSignIn(server.url, browser, envClient, REDIRECT, serverClock)).id_token!;
  assert.is(decodeJwt(foreign).aud, envClient);
  // The token endpoint's answer, with that ID token swapped in (an on-path or mixed-up token endpoint).
  const proxy: Server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const upstream = await fetch(`${server.url}${req.url}`, req.method === 'POST' ? { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body } : {});
    const json = (await upstream.json()) as Record<string, unknown>;
    if (json.id_token) json.id_token = foreign;
    res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  try {
    const result = await settled(
      cliSignIn(proxyUrl, CLI_CLIENT_ID, async (url) => {
        const { location } = await browser.authorize(url.replace(proxyUrl, server.url));
        await fetch(location!);
      }, serverClock),
    );
    assert.not.ok(result.ok, `accepted an ID token with aud=${result.ok ? String(decodeJwt(result.value.id_token!).aud) : ''}`);
    assert.match((result as { error: Error }).error.message, /aud/, (result as { error: Error }).error?.message);
  } finally {
    proxy.close();
  }
});

/** A browser that hands back the registry's real redirect, with one parameter changed on the way. */
class TamperingBrowser extends RegistryBrowser {
  constructor(
    base: string,
    device: DeviceClient,
    private readonly param: string,
    private readonly value: string,
  ) {
    super(base, device);
  }
  override async authorize(url: string, decision: 'allow' | 'deny' = 'allow'): Promise<{ location?: URL; response: Response }> {
    const result = await browser.authorize(url, decision);
    result.location?.searchParams.set(this.param, this.value);
    return result;
  }
}

test('environmentSignIn: a redirect whose state is not the one it sent is refused', async () => {
  const tampering = new TamperingBrowser(server.url, await DeviceClient.generate('unused'), 'state', 'attacker-chosen');
  const result = await settled(environmentSignIn(server.url, tampering, envClient, REDIRECT, serverClock));
  assert.not.ok(result.ok, 'exchanged a code that came back with state=attacker-chosen');
  assert.match((result as { error: Error }).error.message, /state/);
});

test('environmentSignIn: a redirect whose `iss` is not this registry is refused', async () => {
  const tampering = new TamperingBrowser(server.url, await DeviceClient.generate('unused'), 'iss', 'https://attacker.example');
  const result = await settled(environmentSignIn(server.url, tampering, envClient, REDIRECT, serverClock));
  assert.not.ok(result.ok, 'exchanged a code that came back with iss=https://attacker.example');
  assert.match((result as { error: Error }).error.message, /issuer https:\/\/attacker\.example/);
});

test('RuntimeClient: after createSession() again, the old session lease is not sent with the new session', async () => {
  const token = (await environmentSignIn(server.url, browser, envClient, REDIRECT, serverClock)).access_token;
  const page = await new RuntimeClient(server.url, token, ORIGIN).open();
  const oldLease = page.lease!;
  assert.is((await page.createSession()).status, 201);
  const headers = page.headers({ active: true });
  assert.not.ok(
    headers['x-platform-runtime-lease'] === oldLease.leaseId,
    `new standby session ${page.sessionId} still carries lease ${oldLease.leaseId} v${oldLease.leaseVersion} of the previous session`,
  );
});

test('RuntimeClient: after release(), socketUrl() refuses instead of pointing at the released lease', async () => {
  const token = (await environmentSignIn(server.url, browser, envClient, REDIRECT, serverClock)).access_token;
  const page = await new RuntimeClient(server.url, token, ORIGIN).open();
  assert.is((await page.release()).status, 200);
  let url: string | undefined;
  try {
    url = page.socketUrl();
  } catch {
    url = undefined;
  }
  assert.is(url, undefined, `socketUrl() after release: ${url}`);
});

test('DeviceClient.request: the signed htu is the target fetch actually sends (a path fetch percent-encodes)', async () => {
  const signer = await DeviceClient.generate('htu probe');
  signer.now = () => clock.now();
  const started = await startEnrolment(server.url, 'htuprobe', signer);
  const done = await signer.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });
  assert.is(done.status, 201, await done.clone().text());
  // An Environment id the caller did not encode: fetch sends /no%20such, the assertion says /no such.
  const res = await signer.request(server.url, 'GET', '/v1/account/environments/no such/actor');
  const text = await res.text();
  assert.is(res.status, 404, `expected 404 environment_not_found, got ${res.status} ${text}`);
});

test.run();
