import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { counterKind } from '../fixtures/counter.kind.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Answers of several megabytes leave whole for a client that reads them: the operator's live-actor inventory (GET
 * /actors on the ops listener, not paginated) with tens of thousands of live actors. An earlier reply writer cut any
 * reply leaving more than 1 MiB unsent after its first write, reader or not.
 */
const OPS_TOKEN = 'operator-token-0123456789';
const LIVE_ACTORS = 24_000;
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), { kinds: [counterKind] }, { OPS_TOKEN });
test.before(async () => {
  const host = server.services.host;
  const pad = 'k'.repeat(56);
  for (let i = 0; i < LIVE_ACTORS; i += 4_000) {
    await Promise.all(Array.from({ length: 4_000 }, (_, j) => host.send('counter', `${pad}-${String(i + j).padStart(6, '0')}`, { type: 'counter.add', amount: 1 })));
  }
  assert.is(host.liveCount, LIVE_ACTORS);
});

test('GET /actors (ops) with many live actors reaches a client that reads it at once, whole', async () => {
  let body: string | undefined;
  let failure = '';
  let declared: string | null = null;
  try {
    const res = await fetch(`${server.opsUrl}/actors`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } });
    declared = res.headers.get('content-length');
    body = await res.text();
  } catch (error) {
    failure = `${(error as Error).message} (${String((error as Error).cause)})`;
  }
  assert.ok(body !== undefined, `a ${declared}-byte inventory was cut while the client read it: ${failure}`);
  assert.is((JSON.parse(body) as { count: number }).count, LIVE_ACTORS);
});

test.run();
