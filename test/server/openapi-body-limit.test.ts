import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { assertApiError, assertProblem, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * MAX_BODY_BYTES bounds every request body, the bodies of operations that take none included: one sent over the limit
 * is 413 `body_too_large` before it is known to be unwanted, so each operation's description declares that 413.
 */
const MAX_BODY_BYTES = 4096;
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts, { MAX_BODY_BYTES: String(MAX_BODY_BYTES) });

type Operations = Record<string, Record<string, { responses: Record<string, unknown> }>>;

test('an operation taking no body answers a body over the limit 413, as its description declares', async () => {
  const { device } = await enrolFirst(server.url, 'wren');
  const big = 'x'.repeat(MAX_BODY_BYTES + 1);
  const assertion = await device.assertion({ method: 'POST', target: '/v1/account/sign-out', body: big, bindBody: true });
  const signOut = await fetch(`${server.url}/v1/account/sign-out`, { method: 'POST', headers: { 'platform-device-assertion': assertion, 'content-type': 'application/json' }, body: big });
  await assertProblem(signOut, 413, 'body_too_large');
  const revoke = await fetch(`${server.url}/v1/auth/management-sessions/grt_00000000000000000000000000`, { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: big });
  await assertApiError(revoke, 413, 'body_too_large');
  const paths = ((await jsonOf(await fetch(`${server.url}/v1/openapi.json`))) as { paths: Operations }).paths;
  assert.ok('413' in paths['/v1/account/sign-out']!.post!.responses);
  assert.ok('413' in paths['/v1/auth/management-sessions/{sessionId}']!.delete!.responses);
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(item)) assert.ok('413' in operation.responses, `${method} ${path}`);
  }
});

test.run();
