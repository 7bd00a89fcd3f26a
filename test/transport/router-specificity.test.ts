import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute, type AnyRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';

/**
 * Two parameterised paths that both fit one request (`…/grants/introspect` and `…/grants/{grantId}`, as the plugin
 * and Environment Backend grant routes have): the one with the literal segment is meant, whatever order the features
 * happened to list their routes in.
 */
const Which = apiSchema('TestRouterWhich', z.strictObject({ route: z.string() }));
const route = (operationId: string, method: 'post' | 'delete', path: string, params: z.ZodType): AnyRoute =>
  defineRoute({
    operationId,
    method,
    path,
    summary: operationId,
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    params,
    responses: { 200: { description: 'Which route answered.', schema: Which } },
    handler: async () => ({ status: 200, body: { route: operationId } }),
  });
const introspect = route('testIntrospect', 'post', '/v1/test/things/{thingId}/grants/introspect', z.strictObject({ thingId: z.string() }));
const revoke = route('testRevoke', 'delete', '/v1/test/things/{thingId}/grants/{grantId}', z.strictObject({ thingId: z.string(), grantId: z.string() }));

let db: TestDatabase;
let gateways: TestGateway[] = [];

test.before(async () => {
  db = await createTestDatabase();
  const idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateways = [await startGateway({ routes: [introspect, revoke], idempotency }), await startGateway({ routes: [revoke, introspect], idempotency })];
});
test.after(async () => {
  for (const g of gateways) g.close();
  await db.drop();
});

test('the path with a literal segment wins over a parameter there, in either order of the route table', async () => {
  for (const [i, gateway] of gateways.entries()) {
    const res = await fetch(`${gateway.url}/v1/test/things/t1/grants/introspect`, { method: 'POST' });
    assert.is(res.status, 200, `route table order #${i}`);
    assert.equal(await res.json(), { route: 'testIntrospect' });
    const other = await fetch(`${gateway.url}/v1/test/things/t1/grants/grt_1`, { method: 'DELETE' });
    assert.equal([other.status, await other.json()], [200, { route: 'testRevoke' }], `route table order #${i}`);
  }
});

test.run();
