import { sql } from 'kysely';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Revoking reviewer authority ends every review host capability of the account, including one whose issuance was
 * under way while the revocation committed: an issuance that read the authority before the revocation must not
 * leave a live capability behind it.
 */
let db: TestDatabase;
let server: TestServer;
let carol: { device: DeviceClient; accountId: string };
let bearer: string;
withTestServer(test, (started) => ({ db, server } = started), productParts);
test.before(async () => {
  carol = await enrolFirst(server.url, 'carol');
  const op = await fetch(`${server.opsUrl}/registry/accounts/carol/platform-admin`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops' },
    body: JSON.stringify({ reason: 'first administrator' }),
  });
  assert.is(op.status, 200);
  const desktop = await carol.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  bearer = ((await desktop.json()) as { accessToken: string }).accessToken;
});

const authority = (method: 'PUT' | 'DELETE') =>
  fetch(`${server.url}/v1/admin/reviewer-authorities/${carol.accountId}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'review rota' }),
  });
const issue = () => carol.device.request(server.url, 'POST', '/v1/review/host-capabilities', {});
const liveCapabilities = async () =>
  (await db.connection.db.selectFrom('review_host_capabilities').select('id').where('account_id', '=', carol.accountId).where('revoked_at', 'is', null).execute()).length;
/** The statements of this test's database that wait for a lock. */
const waitingOnLocks = async (): Promise<string[]> =>
  (await sql<{ query: string }>`SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(db.connection.db)).rows.map((r) => r.query);
const isHeldInsert = (query: string): boolean => /^insert into "review_host_capabilities"/i.test(query);

test('a review host capability issued while reviewer authority is being revoked does not outlive the revocation', async () => {
  for (let round = 0; round < 15; round++) {
    assert.is((await authority('PUT')).status, 200);
    const issuing = Array.from({ length: 24 }, issue);
    const revoked = authority('DELETE');
    const statuses = (await Promise.all(issuing)).map((r) => r.status);
    assert.is((await revoked).status, 200);
    // Either serial order is legal, and rounds often have only one: the revocation first (every issuance 403), or
    // issuances first (201, then ended by the revocation). The test below makes the second order happen for sure.
    const live = await liveCapabilities();
    assert.is(live, 0, `round ${round}: ${live} capabilities outlived the revocation (statuses ${statuses.join(',')})`);
  }
});

test('an issuance that read the authority before the revocation: the revocation waits for it and ends its capability', async () => {
  assert.is((await authority('PUT')).status, 200);
  let issuing!: Promise<Response>;
  let revoked!: Promise<Response>;
  // The issuance is held at its insert (the test holds the capabilities table) after it read the authority.
  await db.connection.db.transaction().execute(async (trx) => {
    await sql`LOCK TABLE review_host_capabilities IN SHARE MODE`.execute(trx);
    issuing = issue();
    await waitFor(async () => (await waitingOnLocks()).some(isHeldInsert), 'the issuance to wait at its insert');
    revoked = authority('DELETE');
    const blocked = await waitFor(async () => (await waitingOnLocks()).find((query) => !isHeldInsert(query)), 'the revocation to wait');
    assert.match(blocked, /^delete from "reviewer_authorities"/i, `the revocation went past an issuance that had read the authority; it waits at: ${blocked}`);
  });
  assert.is((await issuing).status, 201);
  assert.is((await revoked).status, 200);
  assert.is(await liveCapabilities(), 0, 'the capability issued before the revocation committed outlived it');
});

test.run();
