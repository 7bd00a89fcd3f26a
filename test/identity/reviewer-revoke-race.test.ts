import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Revoking reviewer authority ends every review host capability of the account, including one whose issuance was
 * under way while the revocation committed: an issuance that read the authority before the revocation must not
 * leave a live capability behind it.
 */
let db: TestDatabase;
let server: TestServer;
withTestServer(test, (started) => ({ db, server } = started), productParts);

test('a review host capability issued while reviewer authority is being revoked does not outlive the revocation', async () => {
  const carol: { device: DeviceClient; accountId: string } = await enrolFirst(server.url, 'carol');
  const op = await fetch(`${server.opsUrl}/registry/accounts/carol/platform-admin`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'x-operator-name': 'ops' },
    body: JSON.stringify({ reason: 'first administrator' }),
  });
  assert.is(op.status, 200);
  const desktop = await carol.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const bearer = ((await desktop.json()) as { accessToken: string }).accessToken;
  const authority = (method: 'PUT' | 'DELETE') =>
    fetch(`${server.url}/v1/admin/reviewer-authorities/${carol.accountId}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'review rota' }),
    });
  let issuedDuringRace = 0;
  for (let round = 0; round < 15; round++) {
    assert.is((await authority('PUT')).status, 200);
    const issuing = Array.from({ length: 24 }, () => carol.device.request(server.url, 'POST', '/v1/review/host-capabilities', {}));
    const revoked = authority('DELETE');
    const statuses = (await Promise.all(issuing)).map((r) => r.status);
    assert.is((await revoked).status, 200);
    issuedDuringRace += statuses.filter((s) => s === 201).length;
    const live = await db.connection.db
      .selectFrom('review_host_capabilities')
      .select('id')
      .where('account_id', '=', carol.accountId)
      .where('revoked_at', 'is', null)
      .execute();
    assert.is(live.length, 0, `round ${round}: ${live.length} capabilities outlived the revocation (statuses ${statuses.join(',')})`);
  }
  assert.ok(issuedDuringRace > 0, 'some issuances ran before the revocation');
});

test.run();
