import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { BackendGrants } from '../../runtime/backend-grants.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertApiError } from '../support/identity.js';
import { declareBackend, LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A grant is issued against the declaration as it stands when the grant row is written, not as it was read a moment
 * before: a redeclaration that lands between the issuer's read and its insert (a pool wait, a GC pause, a slow insert)
 * either revokes the grant (inserted first) or has the issuer refuse it, or issue it for the new endpoint.
 */
let db: TestDatabase;
let server: TestServer;
let pete: RuntimePerson;
let world: TestEnvironment;
let page: RuntimeClient;
const OLD = 'https://api.race-world.example/grants';
const MOVED = 'https://api2.race-world.example/grants';
const GRANTS = '/v1/runtime/environment-backend/grants';

withTestServer(test, (started) => ({ db, server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  pete = await runtimePerson(server, 'pete');
  world = await testEnvironment(server.opsUrl, 'race-world', 'pete');
  page = await (await pete.runtime(world)).open();
});
test.before.each(async () => {
  assert.is((await declareBackend(server.opsUrl, world.environmentId, { endpoint: OLD, scopes: ['orders:read', 'orders:write'] })).status, 200);
});

const introspect = async (grant: string, endpoint: string) =>
  jsonOf(await fetch(`${server.url}${GRANTS}/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant, endpoint }) }));

const liveGrantsFor = async (endpoint: string): Promise<number> =>
  (await db.connection.db.selectFrom('environment_backend_grants').select('id').where('endpoint', '=', endpoint).where('revoked_at', 'is', null).execute()).length;

/** Issues `scopes` with `redeclaration` committed after the issuer read the declaration and before it goes on. */
async function issueAcross(scopes: string[], redeclaration: { endpoint: string; scopes: string[] }): Promise<Response> {
  const original = BackendGrants.prototype.backendOf;
  let redeclared = false;
  BackendGrants.prototype.backendOf = async function (this: BackendGrants, environmentId: string) {
    const declared = await original.call(this, environmentId);
    if (!redeclared) {
      redeclared = true;
      assert.is((await declareBackend(server.opsUrl, world.environmentId, redeclaration)).status, 200);
    }
    return declared;
  };
  try {
    const res = await page.fenced(GRANTS, { method: 'POST', body: { scopes } });
    assert.ok(redeclared, 'the issuer read the declaration');
    return res;
  } finally {
    BackendGrants.prototype.backendOf = original;
  }
}

test('a redeclaration committed between the read and the insert withdraws the endpoint and scope: refused', async () => {
  const res = await issueAcross(['orders:write'], { endpoint: MOVED, scopes: ['orders:read'] });
  await assertApiError(res, 422, 'scope_not_declared');
  assert.is(await liveGrantsFor(OLD), 0, 'no live grant for the withdrawn endpoint');
});

test('a redeclaration committed between the read and the insert moves the endpoint only: issued for the new one', async () => {
  const res = await issueAcross(['orders:read'], { endpoint: MOVED, scopes: ['orders:read'] });
  const body = (await jsonOf(res.clone())) as { grant: string; endpoint: string };
  assert.is(res.status, 201, JSON.stringify(body));
  assert.is(body.endpoint, MOVED);
  assert.is((await introspect(body.grant, MOVED)).active, true);
  assert.equal(await introspect(body.grant, OLD), { active: false });
  assert.is(await liveGrantsFor(OLD), 0);
});

test('an issue meeting a redeclaration in flight waits for it, then is refused', async () => {
  let settled = false;
  let issuing: Promise<Response> | undefined;
  // What declare() does, held open until the issuer is seen waiting on the declaration (or has already answered).
  await db.connection.db.transaction().execute(async (trx) => {
    const at = new Date();
    await trx.updateTable('environment_backends').set({ endpoint: MOVED, scopes: JSON.stringify(['orders:read']), updated_at: at }).where('environment_id', '=', world.environmentId).execute();
    await trx
      .updateTable('environment_backend_grants')
      .set({ revoked_at: at, revoked_reason: 'backend_redeclared' })
      .where('environment_id', '=', world.environmentId)
      .where('revoked_at', 'is', null)
      .where(sql<boolean>`(endpoint <> ${MOVED} OR NOT (scopes <@ ${JSON.stringify(['orders:read'])}::jsonb))`)
      .execute();
    issuing = page.fenced(GRANTS, { method: 'POST', body: { scopes: ['orders:write'] } }).finally(() => (settled = true));
    await waitFor(async () => {
      if (settled) return true;
      const waiting = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%environment_backend_grants%'`.execute(db.connection.db);
      return waiting.rows[0]!.n > 0;
    }, 'the issuer to wait on the declaration or answer');
  });
  const res = await issuing!;
  const body = (await jsonOf(res.clone())) as { grant?: string };
  const state = body.grant === undefined ? undefined : await introspect(body.grant, OLD);
  assert.is(res.status, 422, `issued ${res.status} ${JSON.stringify(body)} across the redeclaration; introspection at the old endpoint: ${JSON.stringify(state)}`);
  await assertApiError(res, 422, 'scope_not_declared');
  assert.is(await liveGrantsFor(OLD), 0);
});

test.run();
