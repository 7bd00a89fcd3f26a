import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * An Environment is reached by its origin: CORS, runtime sessions and the OIDC redirect all bind to it, and the
 * account's actor id is "unlinkable across Environments". Two Environments at one origin give the pages of that one
 * origin two pairwise ids of every person, linked by construction. The operators' registration takes a second
 * Environment at an origin already registered.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

const register = (environmentId: string, origin: string, ownerHandle: string) =>
  fetch(`${server.opsUrl}/registry/environments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'reviewer' },
    body: JSON.stringify({ environmentId, origin, ownerHandle, redirectUris: [`${origin}/callback`] }),
  });

test('a second Environment at an origin already registered is refused (409 environment_origin_taken)', async () => {
  const { device } = await enrolFirst(server.url, 'owner-one');
  await enrolFirst(server.url, 'owner-two');
  const first = await register('first-env', 'https://shared.example', 'owner-one');
  assert.is(first.status, 201, await first.text());
  const second = await register('second-env', 'https://shared.example', 'owner-two');
  const text = await second.text();
  if (second.status === 201) {
    // Both answer the same person with different ids, and both ids flow to pages of https://shared.example.
    const a = (await (await device.request(server.url, 'GET', '/v1/account/environments/first-env/actor')).json()) as { actorId: string };
    const b = (await (await device.request(server.url, 'GET', '/v1/account/environments/second-env/actor')).json()) as { actorId: string };
    assert.unreachable(`registered a second Environment at https://shared.example (201 ${text}); one origin now holds actor ids ${a.actorId} and ${b.actorId} of the same account`);
  }
  assert.is(second.status, 409, text);
  assert.is((JSON.parse(text) as { error: { code: string } }).error.code, 'environment_origin_taken');
  // Registrations racing for one origin take turns: exactly one wins.
  await enrolFirst(server.url, 'owner-four');
  const raced = await Promise.all(['race-a', 'race-b', 'race-c'].map((id) => register(id, 'https://raced.example', 'owner-four')));
  assert.equal(raced.map((r) => r.status).sort(), [201, 409, 409]);
});

test('a redirect URI with a fragment component is refused, an empty one too (RFC 6749 section 3.1.2)', async () => {
  await enrolFirst(server.url, 'owner-three');
  const res = await fetch(`${server.opsUrl}/registry/environments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'reviewer' },
    body: JSON.stringify({ environmentId: 'fragment-env', origin: 'https://fragment.example', ownerHandle: 'owner-three', redirectUris: ['https://fragment.example/callback#'] }),
  });
  const text = await res.text();
  assert.is(res.status, 400, `a redirect URI ending in '#' (a fragment component, empty) was registered: ${text}`);
});

test.run();
