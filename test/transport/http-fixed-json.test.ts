import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute, FixedJson } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';

/**
 * Fixed JSON bodies (the OpenAPI document): built once, validated and serialised by the gateway once, the same bytes
 * sent to every request, and never changed after they were built.
 */
let checks = 0;
// Counts how often the gateway validates (and so serialises) the body: a real schema, checked by the real gateway.
const Document = apiSchema(
  'TestFixedDocument',
  z.looseObject({ title: z.string(), nested: z.object({ items: z.array(z.number()) }) }).superRefine(() => void checks++),
);
let current: FixedJson<z.input<typeof Document>> = new FixedJson({ title: 'first', nested: { items: [1, 2, 3] }, extra: 'kept: the schema is loose' });

let db: TestDatabase;
let server: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  server = await startGateway({
    routes: [
      defineRoute({
        operationId: 'fixedDocument',
        method: 'get',
        path: '/v1/test/document',
        summary: 'A fixed document',
        tags: ['Test'],
        credential: 'none',
        errorFormat: 'api',
        responses: { 200: { description: 'The document.', schema: Document } },
        handler: async () => ({ status: 200, body: current }),
      }),
    ],
    idempotency: new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 }),
  });
});
test.after(async () => {
  server.close();
  await db.drop();
});

test('a fixed body is validated and serialised once, the same bytes answering every request, HEAD included', async () => {
  const bodies: string[] = [];
  for (let i = 0; i < 5; i++) bodies.push(await (await fetch(`${server.url}/v1/test/document`)).text());
  const head = await fetch(`${server.url}/v1/test/document`, { method: 'HEAD' });
  assert.is(checks, 1, `validated ${checks} times for 6 requests`);
  assert.equal(new Set(bodies).size, 1);
  assert.equal(JSON.parse(bodies[0]!), { title: 'first', nested: { items: [1, 2, 3] }, extra: 'kept: the schema is loose' });
  assert.is(head.headers.get('content-length'), String(Buffer.byteLength(bodies[0]!)));
  // A new document (the OpenAPI one is rebuilt once the listening port is known) is checked and serialised afresh.
  current = new FixedJson({ title: 'second', nested: { items: [] } });
  assert.equal(await (await fetch(`${server.url}/v1/test/document`)).json(), { title: 'second', nested: { items: [] } });
  assert.is(checks, 2);
});

test('a fixed body cannot be changed after it is built, at any depth', () => {
  const fixed = new FixedJson({ title: 't', nested: { items: [1] } });
  assert.throws(() => {
    (fixed.value.nested.items as number[]).push(2);
  }, TypeError);
  assert.throws(() => {
    (fixed.value as { title: string }).title = 'changed';
  }, TypeError);
  assert.equal(fixed.value, { title: 't', nested: { items: [1] } });
});

test.run();
