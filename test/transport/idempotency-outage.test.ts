import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import type { IdempotencyClaim, IdempotencyStore, StoredResult } from '../../storage/idempotency-store.js';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import type { SweepOutcome } from '../../storage/sweep.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';

/**
 * An Idempotency-Key promises at most one application per key, and the API description promises that a 503 means
 * "not applied, may be retried". Both must survive the idempotency store failing after the operation was applied,
 * when only recording its result is left to do.
 */
let db: TestDatabase;
let gateway: TestGateway;
let applied = 0;
/** Set to make the next `complete` fail as a lost database connection does (pg's error for a terminated backend). */
let failNextComplete = false;

class FlakyCompleteStore implements IdempotencyStore {
  readonly #inner: IdempotencyStore;
  constructor(inner: IdempotencyStore) {
    this.#inner = inner;
  }
  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyClaim> {
    return this.#inner.begin(scope, key, fingerprint);
  }
  complete(scope: string, key: string, claim: string, result: StoredResult): Promise<void> {
    if (failNextComplete) {
      failNextComplete = false;
      const lost = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
      return Promise.reject(lost);
    }
    return this.#inner.complete(scope, key, claim, result);
  }
  abandon(scope: string, key: string, claim: string): Promise<void> {
    return this.#inner.abandon(scope, key, claim);
  }
  sweep(signal?: AbortSignal): Promise<SweepOutcome> {
    return this.#inner.sweep(signal);
  }
}

const Applied = apiSchema('TestIdemApplied', z.strictObject({ applied: z.number().int() }));
const Apply = apiSchema('TestIdemApply', z.strictObject({ note: z.string() }));

test.before(async () => {
  db = await createTestDatabase();
  const store = new FlakyCompleteStore(new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 }));
  gateway = await startGateway({
    idempotency: store,
    routes: [
      defineRoute({
        operationId: 'testIdemApply',
        method: 'post',
        path: '/v1/test/idem-apply',
        summary: 'Applies once per key',
        tags: ['Test'],
        credential: 'none',
        errorFormat: 'api',
        idempotency: 'required',
        body: Apply,
        responses: { 201: { description: 'Applied.', schema: Applied } },
        handler: async () => {
          applied += 1;
          return { status: 201, body: { applied } };
        },
      }),
    ],
  });
});
test.after(async () => {
  gateway.close();
  await db.drop();
});

const apply = (key: string) =>
  fetch(`${gateway.url}/v1/test/idem-apply`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ note: 'once' }),
  });

test('the store failing to record an applied result: the client gets the result, not a 503 inviting a second application', async () => {
  failNextComplete = true;
  const first = await apply('outage-key-000000001');
  const body = (await first.json()) as Record<string, unknown>;
  assert.is(applied, 1, 'the operation was applied');
  // A 503 here tells the client "not applied, retry": it was applied, and the retry (once the claim lapses) applies it
  // again. What was applied is answered as applied.
  assert.is(first.status, 201, JSON.stringify(body));
  assert.equal(body, { applied: 1 });
  const retry = await apply('outage-key-000000001');
  assert.is.not(retry.status, 201, 'a retry is not applied again');
  assert.is(applied, 1);
});

test('control: without a failure the result is recorded and replayed', async () => {
  const first = await apply('outage-key-000000002');
  assert.is(first.status, 201);
  const again = await apply('outage-key-000000002');
  assert.is(again.status, 200);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(await again.json(), await first.json());
});

test.run();
