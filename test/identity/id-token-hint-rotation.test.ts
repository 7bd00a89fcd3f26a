import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { ManualClock } from '../../actors/clock.js';
import { authorizationUrl, pkcePair, RegistryBrowser, tokenRequest } from '../../client/oidc-client.js';
import { LONGEST_SIGNED_LIFETIME_S } from '../../identity/signing-keys.js';
import { productParts } from '../../server/main.js';
import { enrolFirst, registerEnvironment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * An `id_token_hint` is taken whatever its age, but only while the key that signed it is published: a signing-key
 * rotation keeps the retired key for at least the longest token lifetime, then a later rotation (or at once, a
 * withdrawal) unpublishes it, and a hint it signed is no longer one the registry can tell it issued.
 */
const ORIGIN = 'https://hint-rotation.example';
const clock = new ManualClock(Date.now());
let server: TestServer;
let browser: RegistryBrowser;
let clientId: string;

withTestServer(test, (started) => ({ server } = started), productParts, {}, clock);
test.before(async () => {
  const { device } = await enrolFirst(server.url, 'hintrot');
  device.now = () => clock.now();
  browser = new RegistryBrowser(server.url, device);
  assert.is((await browser.openPageSession()).status, 204);
  ({ clientId } = await registerEnvironment(server.opsUrl, { environmentId: 'hint-rotation', origin: ORIGIN, ownerHandle: 'hintrot', redirectUris: [`${ORIGIN}/cb`] }));
});

/** Signs in at the client (consenting the first time) and answers the ID token it receives. */
async function idToken(): Promise<string> {
  const { verifier, challenge } = pkcePair();
  const { location } = await browser.authorize(authorizationUrl(server.url, { clientId, redirectUri: `${ORIGIN}/cb`, challenge, nonce: 'n' }));
  const code = location?.searchParams.get('code');
  assert.ok(code, location?.href);
  const res = await tokenRequest(server.url, { grant_type: 'authorization_code', client_id: clientId, code: code!, redirect_uri: `${ORIGIN}/cb`, code_verifier: verifier });
  assert.is(res.status, 200, JSON.stringify(res.body));
  return String(res.body.id_token);
}

async function silent(hint: string): Promise<URLSearchParams> {
  const url = new URL(authorizationUrl(server.url, { clientId, redirectUri: `${ORIGIN}/cb`, challenge: pkcePair().challenge, state: 's', prompt: 'none' }));
  url.searchParams.set('id_token_hint', hint);
  const res = await browser.fetch(url.href);
  assert.is(res.status, 303);
  return new URL(res.headers.get('location')!).searchParams;
}

async function rotate(withdraw = false): Promise<void> {
  const res = await fetch(`${server.opsUrl}/registry/signing-keys/rotate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops-ivo' },
    body: JSON.stringify({ reason: 'scheduled', withdraw }),
  });
  assert.is(res.status, 200, await res.text());
}

test('a hint signed by a retired key is taken until a later rotation unpublishes that key, then it is invalid_request', async () => {
  const old = await idToken();
  await rotate();
  assert.ok((await silent(old)).get('code'), 'the retired key is still published');
  clock.advance(LONGEST_SIGNED_LIFETIME_S * 1000 + 1000);
  assert.is((await browser.openPageSession()).status, 204);
  await rotate();
  const back = await silent(old);
  assert.is(back.get('error'), 'invalid_request');
  assert.is(back.get('code'), null);
});

test('a hint signed by a withdrawn key is invalid_request at once; one signed by the new key is taken', async () => {
  const old = await idToken();
  await rotate(true);
  assert.is((await silent(old)).get('error'), 'invalid_request');
  assert.ok((await silent(await idToken())).get('code'));
});

test('the API description and docs/decisions.md say a hint is taken only while its key is published', async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
    paths: Record<string, { get: { parameters: Array<{ name: string; description?: string }> } }>;
  };
  const hint = doc.paths['/v1/oidc/authorize']!.get.parameters.find((p) => p.name === 'id_token_hint');
  assert.match(hint?.description ?? '', /\/v1\/auth\/jwks/);
  const readme = await readFile(new URL('../../../docs/decisions.md', import.meta.url), 'utf8');
  const sentence = /`id_token_hint`, when sent, names \(([^)]*)\)/.exec(readme.replace(/\s+/g, ' '))?.[1] ?? '';
  assert.match(sentence, /\/v1\/auth\/jwks/);
  // The operators' command list: every command its own code span.
  assert.match(readme.replace(/\s+/g, ' '), /`audit list \[--target\] \[--limit\]`, `signing-keys list`/);
});

test.run();
