import { Session } from 'node:inspector/promises';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { EvictionQuota } from '../../runtime/eviction-quota.js';
import { productParts } from '../../server/main.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The eviction quota's memory: a bucket per person is kept only while it says something (a known holder, activations
 * in flight, or tokens spent and not yet refilled). A person who evicted, then let the lease go (a tab switched, then
 * closed), must not be remembered for good once their bucket has refilled.
 *
 * The buckets are private to the running server's quota; the inspector reads how many it holds, as a heap snapshot would.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let ola: RuntimePerson;
const inspector = new Session();

withTestServer(test, (started) => ({ server } = started), productParts, { ...LONG_LEASE_ENV }, clock);
test.before(async () => {
  ola = await runtimePerson(server, 'ola-eq');
  ola.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'quota-memory', 'ola-eq');
  inspector.connect();
  await inspector.post('Runtime.enable');
});
test.after(() => inspector.disconnect());

/** How many persons the server's eviction quota holds a bucket for. */
async function bucketsHeld(): Promise<number> {
  (globalThis as { evictionQuotaPrototype?: object }).evictionQuotaPrototype = EvictionQuota.prototype;
  const proto = await inspector.post('Runtime.evaluate', { expression: 'globalThis.evictionQuotaPrototype' });
  const instances = await inspector.post('Runtime.queryObjects', { prototypeObjectId: proto.result.objectId! });
  const listed = await inspector.post('Runtime.getProperties', { objectId: instances.objects.objectId!, ownProperties: true });
  const quotas = listed.result.filter((p) => /^\d+$/.test(p.name)).map((p) => p.value!.objectId!);
  assert.is(quotas.length, 1, 'one running server, one quota');
  const own = await inspector.post('Runtime.getProperties', { objectId: quotas[0]!, ownProperties: true });
  // Private members are in the protocol's answer, not in Node's typings of it.
  const { privateProperties } = own as { privateProperties?: Array<{ name: string; value?: { objectId?: string } }> };
  const buckets = privateProperties?.find((p) => p.name === '#buckets')?.value?.objectId;
  assert.ok(buckets, 'the quota keeps its buckets in #buckets');
  const size = (await inspector.post('Runtime.callFunctionOn', { objectId: buckets, functionDeclaration: 'function () { return this.size; }', returnByValue: true })) as unknown as {
    result: { value: unknown };
  };
  return size.result.value as number;
}

test('a person who evicted and then released the lease is forgotten once their bucket has refilled', async () => {
  const a = await (await ola.runtime(env)).open();
  const b = await ola.runtime(env);
  assert.is((await b.createSession()).status, 201);
  assert.is((await b.activate()).status, 200, 'b evicts a: one token spent');
  assert.is((await b.release()).status, 200, 'the lease ends without a successor');
  assert.is((await a.release()).status, 200);
  assert.is(await bucketsHeld(), 1, 'a token is still being refilled: the bucket says something');
  // Long after the bucket refilled, with nothing else of this person happening.
  clock.advance(10 * 60_000);
  await new Promise((r) => setTimeout(r, 50));
  assert.is(await bucketsHeld(), 0, 'a full bucket without holder or activation in flight is still held');
});

test('a person whose activations all failed is not remembered: nothing was learnt of their lease', async () => {
  const ended = await ola.runtime(env);
  assert.is((await ended.createSession()).status, 201);
  assert.is((await ended.release()).status, 200);
  // A page activating its ended session, then one activating a session that never existed: each reserved a token
  // (whether it would evict was unknown) and got it back when refused.
  assert.is((await ended.activate()).status, 409);
  ended.sessionId = 'rts_00000000000000000000000000';
  assert.is((await ended.activate()).status, 404);
  assert.is(await bucketsHeld(), 0, 'a full bucket that knows no holder and has nothing in flight is held for good');
});

test.run();
