import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertApiError, assertProblem } from '../support/identity.js';
import { declareBackend, logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/** The lease fence on protected calls, Environment Backend Grants, and introspection after every way of failing. */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let bare: TestEnvironment;
let gina: RuntimePerson;
let hugo: RuntimePerson;
const ENDPOINT = 'https://api.ginas-world.example/registry-grants';
const LEASE_TTL_S = 90;

withTestServer(test, (started) => ({ db, server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_S), ACTOR_TIMER_POLL_MS: '1000' }, clock);
test.before(async () => {
  gina = await runtimePerson(server, 'gina');
  hugo = await runtimePerson(server, 'hugo');
  // The tests move the server's clock by hand; the devices read the same clock.
  gina.device.now = hugo.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'ginas-world', 'gina');
  bare = await testEnvironment(server.opsUrl, 'bare-world', 'gina');
});

const declare = (environmentId: string, body: unknown) => declareBackend(server.opsUrl, environmentId, body);
const grant = (client: RuntimeClient, body: unknown = { scopes: ['orders:read'], context: { table: 7 } }) =>
  client.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body });
const introspect = async (token: string, endpoint = ENDPOINT) =>
  jsonOf(await fetch(`${server.url}/v1/runtime/environment-backend/grants/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant: token, endpoint }) }));
const issued = async (client: RuntimeClient): Promise<{ grant: string; grantId: string }> => {
  const res = await grant(client);
  assert.is(res.status, 201, await res.clone().text());
  return (await res.json()) as { grant: string; grantId: string };
};

test('operators declare the backend: an exact https endpoint and its scopes', async () => {
  await assertApiError(await declare(env.environmentId, { endpoint: 'http://api.example/x', scopes: ['orders:read'] }), 400, 'validation_failed');
  await assertApiError(await declare('no-such-world', { endpoint: ENDPOINT, scopes: ['orders:read'] }), 404, 'environment_not_found');
  const ok = await declare(env.environmentId, { endpoint: ENDPOINT, scopes: ['orders:read', 'orders:write'] });
  assert.is(ok.status, 200, await ok.clone().text());
  const audit = await db.connection.db.selectFrom('audit_events').select(['action', 'actor']).where('action', '=', 'environment.backend.declare').execute();
  assert.equal(audit, [{ action: 'environment.backend.declare', actor: 'operator:test-operator' }]);
});

test('the fence: every refusal of a protected call, before the happy path', async () => {
  const standby = await gina.runtime(env);
  await standby.createSession();
  // A standby session has no lease to send: it is told it is on standby, with or without made-up claims.
  await assertProblem(await grant(standby), 409, 'runtime_session_standby');
  standby.lease = { leaseId: 'lse_00000000000000000000000000', leaseVersion: 1 };
  await assertProblem(await grant(standby), 409, 'runtime_session_standby');

  const first = await (await gina.runtime(env)).open();
  const fence = first.lease!;
  first.lease = { leaseId: 'lse_00000000000000000000000000', leaseVersion: fence.leaseVersion };
  await assertProblem(await grant(first), 409, 'runtime_lease_stale');
  first.lease = { leaseId: fence.leaseId, leaseVersion: fence.leaseVersion + 1 };
  await assertProblem(await grant(first), 409, 'runtime_lease_stale');
  first.lease = { leaseId: fence.leaseId, leaseVersion: 0 };
  await assertProblem(await grant(first), 400, 'runtime_lease_required');
  first.lease = undefined; // an active session that leaves out its claims
  await assertProblem(await grant(first), 400, 'runtime_lease_required');
  first.lease = fence;

  const second = await (await gina.runtime(env)).open();
  await assertProblem(await grant(first), 409, 'runtime_session_superseded');
  first.lease = undefined;
  await assertProblem(await grant(first), 409, 'runtime_session_superseded');
  first.lease = fence;
  // Another person cannot borrow the fence, nor can a control token.
  const thief = await hugo.runtime(env);
  thief.sessionId = second.sessionId;
  thief.lease = second.lease;
  await assertProblem(await grant(thief), 404, 'runtime_session_not_found');
  const control = String((await jsonOf(await second.controlToken())).controlToken);
  const withControl = new RuntimeClient(server.url, control, env.origin);
  withControl.sessionId = second.sessionId;
  withControl.lease = second.lease;
  await assertProblem(await grant(withControl), 401, 'runtime_token_invalid');

  // The holder passes; scopes are only those the Environment declared; an Environment without a backend has none.
  await assertApiError(await grant(second, { scopes: ['orders:delete'] }), 422, 'scope_not_declared');
  await assertApiError(await grant(second, { scopes: ['orders:read'], actor: 'act_someone' }), 400, 'validation_failed');
  const made = await grant(second);
  assert.is(made.status, 201, await made.clone().text());
  const body = await jsonOf(made);
  assert.is(body.endpoint, ENDPOINT);
  assert.is(body.expiresIn, 300);
  const elsewhere = await (await gina.runtime(bare)).open();
  await assertApiError(await grant(elsewhere), 409, 'environment_backend_not_declared');
});

test('introspection answers for the exact endpoint with what the registry derived', async () => {
  const page = await (await gina.runtime(env)).open();
  const { grant: token } = await issued(page);
  const answer = await introspect(token);
  assert.is(answer.active, true);
  assert.is(answer.environmentId, env.environmentId);
  assert.is(answer.origin, env.origin);
  assert.equal(answer.environmentRoles, ['admin']);
  assert.equal(answer.scopes, ['orders:read']);
  assert.equal(answer.context, { table: 7 });
  assert.equal(answer.session, { sessionId: page.sessionId, leaseVersion: page.lease!.leaseVersion });
  assert.match(String(answer.actorId), /^act_/);
  assert.equal(await introspect(token, `${ENDPOINT}/other`), { active: false });
  assert.equal(await introspect('ebg_not-a-grant'), { active: false });
});

test('introspection fails closed: revocation, supersession, release, expiry', async () => {
  const page = await (await gina.runtime(env)).open();
  const revoked = await issued(page);
  const del = await fetch(`${server.url}/v1/runtime/environment-backend/grants/${revoked.grantId}`, { method: 'DELETE', headers: page.headers() });
  assert.is(del.status, 204);
  assert.equal(await introspect(revoked.grant), { active: false }, 'revoked');

  const beforeSupersession = await issued(page);
  const successor = await (await gina.runtime(env)).open();
  assert.equal(await introspect(beforeSupersession.grant), { active: false }, 'superseded');

  const beforeRelease = await issued(successor);
  assert.is((await successor.release()).status, 200);
  assert.equal(await introspect(beforeRelease.grant), { active: false }, 'released');

  const expiring = await (await gina.runtime(env)).open();
  const short = await issued(expiring);
  // Keep the lease alive past the grant's 5 minutes with fenced calls (each issues a grant), so only expiry can end it.
  for (let i = 0; i < 6; i++) {
    clock.advance(55_000);
    assert.is((await grant(expiring)).status, 201);
  }
  assert.is(await sessionState(expiring), 'active', 'the lease held');
  assert.equal(await introspect(short.grant), { active: false }, 'expired');
  clock.advance(60_000);
});

test('a lease nobody renews lapses: the session returns to standby, its old fence hears so, grants end', async () => {
  const page = await (await gina.runtime(env)).open();
  const { grant: token } = await issued(page);
  clock.advance((LEASE_TTL_S + 2) * 1000);
  await waitFor(async () => ((await sessionState(page)) === 'standby' ? true : undefined), 'the lease to lapse');
  assert.equal(await introspect(token), { active: false });
  await assertProblem(await grant(page), 409, 'runtime_session_standby');
  assert.is((await page.activate()).status, 200, 'activating again takes the free lease');
  assert.is((await grant(page)).status, 201);
});

test('browser SSO logout revokes the Runtime sessions of that browser and ends their grants', async () => {
  const page = await (await gina.runtime(env)).open();
  const standby = await gina.runtime(env);
  await standby.createSession();
  const { grant: token } = await issued(page);
  const out = await logoutBrowser(server.url, gina);
  assert.is(out.status, 200, await out.clone().text());
  assert.equal(await introspect(token), { active: false });
  await assertProblem(await page.read(), 401, 'runtime_authorization_expired');
  const states = await db.connection.db
    .selectFrom('actor_snapshots')
    .select(['key'])
    .where('kind', '=', 'runtime-session')
    .where('key', 'in', [page.sessionId!, standby.sessionId!])
    .execute();
  assert.is(states.length, 2);
  for (const id of [page.sessionId!, standby.sessionId!]) {
    const view = await server.services.host.readCommitted('runtime-session', id);
    assert.is((view!.state as { value: string }).value, 'revoked', id);
  }
  const lease = (await server.services.host.readCommitted('runtime-lease', gina.accountId))!.state as { context: { holder: unknown } };
  assert.is(lease.context.holder, null, 'the lease was freed');
});

test.run();
