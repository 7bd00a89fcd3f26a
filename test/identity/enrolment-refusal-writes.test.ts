import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolFirst, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A device waiting to join an account polls its completion until a device of the account admits it; every refusal
 * (`enrolment_pending`, a wrong proof) was an event journaled in the account, so a stranger's pending device wrote the
 * account's journal at the device-assertion rate. Refusals change nothing and now write nothing: the account's
 * journal version, read through the operator listener, stays where it was.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

async function journalVersion(accountId: string): Promise<number> {
  const detail = (await (await fetch(`${server.opsUrl}/actors/account/${accountId}`)).json()) as { persisted: { version: number } };
  return detail.persisted.version;
}

test("a pending device's polls and wrong proofs leave the account's journal as it was", async () => {
  const owner = await enrolFirst(server.url, 'polled');
  const joining = await DeviceClient.generate('polled tablet');
  const started = await startEnrolment(server.url, 'polled', joining);
  const version = await journalVersion(owner.accountId);
  const complete = (nonce: string) => joining.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce }, { bindBody: true });
  for (let i = 0; i < 20; i++) await assertProblem(await complete(started.nonce!), 409, 'enrolment_pending');
  for (let i = 0; i < 10; i++) await assertProblem(await complete(`wrong-${i}-${'x'.repeat(40)}`), 403, 'enrolment_proof_invalid');
  assert.is(await journalVersion(owner.accountId), version);

  // Admission and completion still write, and the device joins.
  assert.is((await owner.device.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: started.enrolmentId, decision: 'admit' })).status, 204);
  assert.is((await complete(started.nonce!)).status, 201);
  assert.ok((await journalVersion(owner.accountId)) > version);
});

test.run();
