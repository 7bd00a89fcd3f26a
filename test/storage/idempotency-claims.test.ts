import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { IdempotencyClaim } from '../../storage/idempotency-store.js';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Idempotency claims belong to the request that made them: a request that outlives its claim, whose key a retry has
 * since taken over, neither releases nor fills the retry's claim.
 */
let db: TestDatabase;
let store: PostgresIdempotencyStore;

test.before(async () => {
  db = await createTestDatabase();
  store = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 60, claimTimeoutSeconds: 0.3 });
});
test.after(async () => {
  await db.drop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const tokenOf = (claim: IdempotencyClaim): string => {
  if (claim.kind !== 'started') throw new Error(`expected a started claim, got ${claim.kind}`);
  return claim.claim;
};
const result = (text: string) => ({ status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from(text) });

test('a claimant whose claim expired and was taken over cannot release the new claim', async () => {
  const [scope, key, fingerprint] = ['account:a', 'idem-key-0123456789', 'fp'];
  const a = tokenOf(await store.begin(scope, key, fingerprint));
  await sleep(500); // A's request outlives the claim timeout
  const b = tokenOf(await store.begin(scope, key, fingerprint));
  assert.is.not(b, a, 'the retry holds a claim of its own');
  await store.abandon(scope, key, a); // A's request finally fails (5xx): it abandons what it claimed
  assert.equal(await store.begin(scope, key, fingerprint), { kind: 'in_progress' }, 'C while B still runs');
  await store.abandon(scope, key, b);
  assert.is((await store.begin(scope, key, fingerprint)).kind, 'started', 'B abandoned its own claim');
});

test('a claimant whose claim expired and was taken over cannot complete the new claim; the new claimant can', async () => {
  const [scope, key, fingerprint] = ['account:a', 'idem-key-9876543210', 'fp'];
  const a = tokenOf(await store.begin(scope, key, fingerprint));
  await sleep(500);
  const b = tokenOf(await store.begin(scope, key, fingerprint));
  await store.complete(scope, key, a, result('from A'));
  assert.equal(await store.begin(scope, key, fingerprint), { kind: 'in_progress' }, 'B still runs: nothing to replay');
  await store.complete(scope, key, b, result('from B'));
  assert.equal(await store.begin(scope, key, fingerprint), { kind: 'replay', result: result('from B') });
});

test('a result is replayed for retentionSeconds (IDEMPOTENCY_RETENTION_SECONDS), then the key is free again and swept', async () => {
  const brief = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 0.5, claimTimeoutSeconds: 60 });
  const [scope, key] = ['account:r', 'idem-key-retention01'];
  await brief.complete(scope, key, tokenOf(await brief.begin(scope, key, 'fp-1')), result('first'));
  assert.equal(await brief.begin(scope, key, 'fp-1'), { kind: 'replay', result: result('first') }, 'within retention: replayed');
  assert.equal(await brief.begin(scope, key, 'fp-2'), { kind: 'mismatch' }, 'within retention: another request is refused');
  await sleep(700);
  const swept = await brief.sweep();
  assert.ok(swept.removed >= 1 && swept.done, 'the sweep removes the expired record');
  assert.is((await brief.begin(scope, key, 'fp-2')).kind, 'started', 'past retention: the key starts afresh');
});

test.run();
