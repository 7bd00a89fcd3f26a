import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { ManualClock } from '../../actors/clock.js';
import { DeviceClient } from '../../client/device-client.js';
import { cliSignIn, RegistryBrowser, tokenRequest, type TokenSet } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { LONGEST_SIGNED_LIFETIME_S } from '../../identity/signing-keys.js';
import { productParts } from '../../server/main.js';
import { assertApiError, startEnrolment } from '../support/identity.js';
import { runRegistryAdmin } from '../support/process.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Operators rotate the registry's signing key (`registry-admin signing-keys rotate`): new tokens carry the new key,
 * what the old one signed verifies until it expires, and a withdrawal (a leaked key) ends it at once.
 */
const OPS_TOKEN = 'ops-token-for-key-rotation';
const clock = new ManualClock(Date.now());
let server: TestServer;
let device: DeviceClient;
let enrolment: { enrolmentId: string; nonce: string };
let passport: string;
let cli: TokenSet;

const { restart } = withTestServer(test, (started) => ({ server } = started), productParts, { OPS_TOKEN }, clock);
test.before(async () => {
  device = await DeviceClient.generate('rosa laptop');
  const started = await startEnrolment(server.url, 'rosa', device);
  enrolment = { enrolmentId: started.enrolmentId!, nonce: started.nonce! };
  passport = await completeEnrolment();
  const browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  cli = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
    const { location } = await browser.authorize(url);
    await fetch(location!);
  });
});

/** Completing the same enrolment again is how a kept device renews its passport. */
async function completeEnrolment(): Promise<string> {
  const res = await device.request(server.url, 'POST', '/v1/enrol/complete', enrolment, { bindBody: true });
  assert.is(res.status, 201, await res.clone().text());
  return ((await res.json()) as { passport: string }).passport;
}

const kidOf = (token: string): string => (JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid;
const jwksKids = async (): Promise<string[]> => ((await (await fetch(`${server.url}/v1/auth/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid);
const introspect = async (token: string): Promise<{ active: boolean; reason?: string }> =>
  (await (await fetch(`${server.url}/v1/auth/passports/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ passport: token }) })).json()) as never;
const me = async (accessToken: string): Promise<boolean> =>
  ((await (await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${accessToken}` } })).json()) as { authenticated: boolean }).authenticated;
const rotate = (body: unknown, headers: Record<string, string> = { authorization: `Bearer ${OPS_TOKEN}`, 'x-operator-name': 'ops-ivo' }) =>
  fetch(`${server.opsUrl}/registry/signing-keys/rotate`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
const admin = (args: string[]) => runRegistryAdmin(server.opsUrl, 'ops-ivo', args, { OPS_TOKEN });
const refresh = async (): Promise<TokenSet> => {
  const res = await tokenRequest(server.url, { grant_type: 'refresh_token', client_id: CLI_CLIENT_ID, refresh_token: cli.refresh_token! });
  assert.is(res.status, 200, JSON.stringify(res.body));
  return res.body as unknown as TokenSet;
};

test('refusals: no operator token, no operator name, no reason, an unknown field; none of them rotates', async () => {
  const before = await jwksKids();
  assert.is((await rotate({ reason: 'scheduled' }, { 'x-operator-name': 'ops-ivo' })).status, 401);
  await assertApiError(await rotate({ reason: 'scheduled' }, { authorization: `Bearer ${OPS_TOKEN}` }), 400, 'operator_name_required');
  await assertApiError(await rotate({}), 400, 'validation_failed');
  await assertApiError(await rotate({ reason: 'scheduled', kid: 'mine' }), 400, 'validation_failed');
  const usage = await admin(['signing-keys', 'rotate']);
  assert.is(usage.code, 2);
  assert.match(usage.stderr, /--reason is required/);
  assert.equal(await jwksKids(), before);
  assert.is(before.length, 1);
});

test('after a rotation new tokens carry the new key; what the old key signed still verifies, and survives a restart', async () => {
  const old = kidOf(passport);
  const done = await admin(['signing-keys', 'rotate', '--reason', 'scheduled rotation']);
  assert.is(done.code, 0, done.stderr);
  const rotation = JSON.parse(done.stdout) as { kid: string; retired: string[]; removed: string[] };
  assert.not.equal(rotation.kid, old);
  assert.equal(rotation.retired, [old]);
  assert.equal(rotation.removed, []);
  assert.equal(await jwksKids(), [rotation.kid, old]);

  assert.equal(await introspect(passport), { active: true });
  assert.ok(await me(cli.access_token), 'an access token signed before the rotation still works');
  cli = await refresh();
  assert.is(kidOf(cli.access_token), rotation.kid);
  const renewed = await completeEnrolment();
  assert.is(kidOf(renewed), rotation.kid);

  const listed = JSON.parse((await admin(['signing-keys', 'list'])).stdout) as { keys: Array<{ kid: string; signing: boolean; retiredAt?: string }> };
  assert.equal(listed.keys.map((k) => [k.kid, k.signing, k.retiredAt !== undefined]), [[rotation.kid, true, false], [old, false, true]]);
  const audit = JSON.parse((await admin(['audit', 'list', '--target', `signing_key:${rotation.kid}`])).stdout) as { events: Array<{ action: string; actor: string; reason: string }> };
  assert.equal(audit.events.map((e) => [e.action, e.actor, e.reason]), [['signing_key.rotate', 'operator:ops-ivo', 'scheduled rotation']]);

  await restart();
  assert.equal(await jwksKids(), [rotation.kid, old]);
  // Offline, as a verifier holding the published set would (a restarted test server has another URL, so another issuer).
  const published = createLocalJWKSet((await (await fetch(`${server.url}/v1/auth/jwks`)).json()) as JSONWebKeySet);
  await compactVerify(passport, published);
  cli = await refresh();
  assert.is(kidOf(cli.access_token), rotation.kid, 'the new key still signs after a restart');
});

test('a withdrawal unpublishes every older key at once: what they signed is refused; a renewed passport works', async () => {
  const oldAccess = cli.access_token;
  const oldPassport = await completeEnrolment();
  assert.ok(await me(oldAccess));
  const done = await admin(['signing-keys', 'rotate', '--reason', 'key may have leaked', '--withdraw']);
  assert.is(done.code, 0, done.stderr);
  const rotation = JSON.parse(done.stdout) as { kid: string; retired: string[]; removed: string[] };
  assert.equal(rotation.retired, []);
  assert.is(rotation.removed.length, 2);
  assert.equal(await jwksKids(), [rotation.kid]);
  assert.equal(await introspect(oldPassport), { active: false, reason: 'invalid' });
  assert.equal(await introspect(passport), { active: false, reason: 'invalid' });
  assert.is(await me(oldAccess), false, 'an access token of a withdrawn key is refused');
  const renewed = await completeEnrolment();
  assert.equal(await introspect(renewed), { active: true });
});

test('a key retired longer ago than anything signed lives leaves the key set at the next rotation', async () => {
  const first = (await (await rotate({ reason: 'scheduled' })).json()) as { kid: string; retired: string[] };
  assert.is((await jwksKids()).length, 2);
  clock.advance(LONGEST_SIGNED_LIFETIME_S * 1000 - 1000);
  const second = (await (await rotate({ reason: 'scheduled' })).json()) as { kid: string; retired: string[]; removed: string[] };
  assert.equal(second.removed, [], 'retired a second short of the longest lifetime: still published');
  assert.is((await jwksKids()).length, 3);
  clock.advance(2000);
  const third = (await (await rotate({ reason: 'scheduled' })).json()) as { kid: string; retired: string[]; removed: string[] };
  assert.equal(third.removed, first.retired);
  assert.equal(await jwksKids(), [third.kid, second.kid, first.kid]);
});

test.run();
