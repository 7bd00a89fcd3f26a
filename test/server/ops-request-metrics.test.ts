import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The operator listener's requests count in /metrics like the public ones: a wrong operator token, tried again and
 * again against a listener reachable beyond loopback, must show, not only in debug lines.
 */
const OPS_TOKEN = 'operator-token-of-the-test-0123456789';
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), {}, { OPS_TOKEN });

test('operator requests refused for a wrong token are counted by operation and status', async () => {
  for (let i = 0; i < 3; i++) assert.is((await fetch(`${server.opsUrl}/actors`, { headers: { authorization: 'Bearer guessed-token-0123456789' } })).status, 401);
  const metrics = await fetch(`${server.opsUrl}/metrics`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } });
  assert.is(metrics.status, 200);
  const text = await metrics.text();
  assert.match(text, /^registry_http_requests_total\{method="GET",operation="ops:listLiveActors",status="401"\} 3$/m);
});

test.run();
