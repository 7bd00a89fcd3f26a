import { decodeJwt } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { controlToken } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Principal isolation between Environments: an Environment's page and backend see the person only as the pairwise
 * actor id ("the only identity Environments see", credentials.ts; "unlinkable across Environments without the
 * registry's key", environments.ts). Nothing the registry hands to an Environment may carry the private principal or a
 * per-person value shared by every Environment (the reason access tokens leave out the account epoch).
 */
let server: TestServer;
let ada: RuntimePerson;
let envA: TestEnvironment;
let envB: TestEnvironment;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: '3600' });
test.before(async () => {
  ada = await runtimePerson(server, 'ada-linked');
  await runtimePerson(server, 'owner-olga');
  envA = await testEnvironment(server.opsUrl, 'env-alpha', 'owner-olga');
  envB = await testEnvironment(server.opsUrl, 'env-bravo', 'owner-olga');
});

test("the control token an Environment's page receives does not carry the person's account id", async () => {
  const pageA = await ada.runtime(envA);
  assert.is((await pageA.createSession()).status, 201);
  const pageB = await ada.runtime(envB);
  assert.is((await pageB.createSession()).status, 201);
  // The page gets this token over a CORS route and holds it in its own script: a JWS, so its payload is readable.
  const claimsA = decodeJwt(await controlToken(pageA));
  const claimsB = decodeJwt(await controlToken(pageB));
  const everythingA = JSON.stringify(claimsA);
  assert.not.ok(everythingA.includes(ada.accountId), `Environment A's page can read the account id: ${everythingA}`);
  // Nothing in the two Environments' tokens is the same value for the same person.
  const shared = Object.entries(claimsA).filter(([k, v]) => !['iss', 'aud', 'iat', 'exp', 'nbf'].includes(k) && claimsB[k] === v);
  assert.equal(shared, [], `claims equal in both Environments' control tokens link the pairwise ids: ${JSON.stringify(shared)}`);
});

test.run();
