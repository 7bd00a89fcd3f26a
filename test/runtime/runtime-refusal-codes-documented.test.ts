import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { LONG_LEASE_ENV, logoutBrowser, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * registry-api.md, Errors, lists the Runtime's codes (`runtime_token_invalid`, `runtime_authorization_expired`,
 * `runtime_session_standby`, `runtime_session_superseded`, `runtime_lease_stale`, `runtime_coordination_unavailable`)
 * and leaves most of their statuses "not shown": ours must be written in the served OpenAPI description, and be what
 * the server answers. Each code the description names is produced here and compared with it (the outage's 503 is
 * produced in coordination-outage.test.ts).
 */
let server: TestServer;
let env: TestEnvironment;
let other: TestEnvironment;
let rita: RuntimePerson;
let documented: Map<string, number>;

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  rita = await runtimePerson(server, 'rita');
  env = await testEnvironment(server.opsUrl, 'ritas-world', 'rita');
  other = await testEnvironment(server.opsUrl, 'other-world', 'rita');
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { info: { description: string } };
  const paragraph = doc.info.description.split('\n\n').find((p) => p.startsWith('**Runtime credentials.**')) ?? '';
  documented = new Map([...paragraph.matchAll(/`(\d{3}) ([a-z_]+)`/g)].map((m) => [m[2]!, Number(m[1])]));
});

/** The refusal is the documented status, as a Problem carrying the code and a request id. */
async function assertDocumented(res: Response, code: string): Promise<void> {
  const status = documented.get(code);
  assert.ok(status, `the description names ${code} with its status`);
  assert.is(res.headers.get('content-type'), 'application/problem+json', code);
  const body = await jsonOf(res);
  assert.equal([res.status, body.code], [status, code]);
  assert.is(body.requestId, res.headers.get('x-request-id'), code);
}

test("the description names every Runtime code of the spec's Errors table with a status; the spec's own are kept", () => {
  for (const code of ['runtime_token_invalid', 'runtime_authorization_expired', 'runtime_session_standby', 'runtime_session_superseded', 'runtime_lease_stale', 'runtime_coordination_unavailable']) {
    assert.ok(documented.has(code), `${code} is documented (${[...documented.keys()].join(', ')})`);
  }
  assert.is(documented.get('runtime_session_superseded'), 409);
  assert.is(documented.get('runtime_lease_stale'), 409);
  assert.is(documented.get('runtime_coordination_unavailable'), 503);
});

test('token, origin and session refusals answer as documented', async () => {
  const token = await rita.token(env);
  const call = (headers: Record<string, string>, path = '/v1/runtime/session', method = 'POST') => fetch(`${server.url}${path}`, { method, headers });
  await assertDocumented(await call({ origin: env.origin }), 'runtime_token_invalid');
  await assertDocumented(await call({ authorization: `Bearer ${token}` }), 'runtime_origin_required');
  await assertDocumented(await call({ authorization: `Bearer ${token}`, origin: other.origin }), 'runtime_origin_mismatch');
  await assertDocumented(await call({ authorization: `Bearer ${token}`, origin: env.origin }, '/v1/runtime/session/release'), 'runtime_session_required');
  await assertDocumented(
    await call({ authorization: `Bearer ${token}`, origin: env.origin, 'x-platform-runtime-session': 'rts_00000000000000000000000000' }, '/v1/runtime/session', 'GET'),
    'runtime_session_not_found',
  );
});

test('session states and lease claims answer as documented', async () => {
  const first = await rita.runtime(env);
  assert.is((await first.createSession()).status, 201);
  await assertDocumented(await first.read(), 'runtime_session_standby');
  await first.open();
  const held = first.lease!;
  // A lease-fenced route: the credential is checked before the handler (the Plugin need not be installed).
  const SETTINGS = '/v1/runtime/plugins/plg_media/settings';
  await assertDocumented(await first.fenced(SETTINGS, { headers: { 'x-platform-runtime-lease-version': 'one' } }), 'runtime_lease_required');
  await assertDocumented(await first.fenced(SETTINGS, { headers: { 'x-platform-runtime-lease-version': String(held.leaseVersion + 1) } }), 'runtime_lease_stale');
  const second = await (await rita.runtime(env)).open();
  await assertDocumented(await first.read(), 'runtime_session_superseded');
  assert.is((await second.release()).status, 200);
  await assertDocumented(await second.read(), 'runtime_session_ended');
});

test('a sign-in that ended answers as documented', async () => {
  const page = await rita.runtime(env);
  assert.is((await logoutBrowser(server.url, rita)).status, 200);
  await assertDocumented(await page.createSession(), 'runtime_authorization_expired');
});

test.run();
