import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { counterKind } from '../fixtures/counter.kind.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Answers of several megabytes leave whole for a client that reads them: the operator's journal page (GET
 * /actors/{kind}/{key}/journal on the ops listener) at its largest, 500 events of an actor whose events are large. An
 * earlier reply writer cut any reply leaving more than 1 MiB unsent after its first write, reader or not. (The live
 * actor list, which once answered every live actor at once, is paged now.)
 */
const OPS_TOKEN = 'operator-token-0123456789';
const EVENTS = 500;
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), { kinds: [counterKind] }, { OPS_TOKEN });
test.before(async () => {
  const host = server.services.host;
  const note = 'n'.repeat(6_000);
  await Promise.all(Array.from({ length: EVENTS }, (_, i) => host.send('counter', 'large', { type: 'counter.add', amount: 1, note: `${i}-${note}` })));
});

test('GET /actors/{kind}/{key}/journal (ops) of several megabytes reaches a client that reads it at once, whole', async () => {
  let body: string | undefined;
  let failure = '';
  let declared: string | null = null;
  try {
    const res = await fetch(`${server.opsUrl}/actors/counter/large/journal?limit=${EVENTS}`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } });
    declared = res.headers.get('content-length');
    body = await res.text();
  } catch (error) {
    failure = `${(error as Error).message} (${String((error as Error).cause)})`;
  }
  assert.ok(body !== undefined, `a ${declared}-byte journal page was cut while the client read it: ${failure}`);
  assert.ok(body.length > 2 * 1024 * 1024, `${body.length} bytes`);
  assert.is((JSON.parse(body) as { entries: unknown[] }).entries.length, EVENTS);
});

test.run();
