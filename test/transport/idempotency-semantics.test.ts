import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { HttpError } from '../../transport/http/errors.js';
import { buildOpenApiDocument } from '../../transport/http/openapi.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { jsonOf, startGateway, type TestGateway } from '../support/http.js';
import { redoclyLint } from '../support/redocly.js';

/**
 * What the Idempotency-Key middleware replays and what it refuses, through the real gateway and the Postgres store:
 * an identical retry gets the original result, a changed request is refused, and the document says which operations
 * need the header.
 */
const Item = apiSchema('TestIdemItem', z.strictObject({ name: z.string().min(1).max(40) }));
const Made = apiSchema('TestIdemMade', z.strictObject({ name: z.string(), serial: z.number().int() }));

let serial = 0;
/** Refuses its first calls as over a quota, then serves: a refusal that says when to come back. */
let quotaRefusals = 0;

const routes = [
  defineRoute({
    operationId: 'idemQuota',
    method: 'post',
    path: '/v1/test/idem/quota',
    summary: 'Makes an item, within a quota',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    idempotency: 'required',
    body: Item,
    errors: [429],
    responses: { 201: { description: 'Made.', schema: Made } },
    handler: async ({ body }) => {
      if (quotaRefusals > 0) {
        quotaRefusals--;
        throw new HttpError(429, 'item_quota_exceeded', 'too many items this minute', { family: 'account_policy', headers: { 'retry-after': '1' } });
      }
      return { status: 201, body: { name: body.name, serial: ++serial } };
    },
  }),
  defineRoute({
    operationId: 'idemConditional',
    method: 'put',
    path: '/v1/test/idem/conditional',
    summary: 'Replaces an item if it is still the one the caller read',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    idempotency: 'optional',
    requestHeaders: { 'If-Match': { description: 'The tag the caller read.', required: true, schema: z.string() } },
    body: Item,
    errors: [412],
    responses: { 200: { description: 'Replaced.', schema: Made } },
    handler: async ({ body, headers }) => {
      if (headers['if-match'] !== '"current"') throw new HttpError(412, 'precondition_failed', 'the item has changed since it was read');
      return { status: 200, body: { name: body.name, serial: ++serial } };
    },
  }),
];

let db: TestDatabase;
let server: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  server = await startGateway({
    routes,
    idempotency: new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 }),
  });
});
test.after(async () => {
  server.close();
  await db.drop();
});

const send = (method: string, path: string, body: unknown, headers: Record<string, string>) =>
  fetch(server.url + path, { method, body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });

test('a refusal that says when to retry (429 with Retry-After) is not replayed: the retry with the same key runs again', async () => {
  quotaRefusals = 1;
  const headers = { 'idempotency-key': 'quota-retry-key-000001' };
  const refused = await send('POST', '/v1/test/idem/quota', { name: 'a' }, headers);
  assert.is(refused.status, 429);
  assert.is(refused.headers.get('retry-after'), '1');
  await refused.arrayBuffer();
  const retried = await send('POST', '/v1/test/idem/quota', { name: 'a' }, headers);
  const body = await jsonOf(retried);
  assert.is(retried.status, 201, `the retry Retry-After asked for was answered ${retried.status} ${JSON.stringify(body)}`);
  assert.is(retried.headers.get('idempotent-replayed'), null);
  // From then on the key holds that result.
  const replay = await send('POST', '/v1/test/idem/quota', { name: 'a' }, headers);
  assert.equal([replay.status, replay.headers.get('idempotent-replayed'), await jsonOf(replay)], [200, 'true', body]);
});

test('a request header the operation reads (If-Match) is part of the request: another value under the same key is refused 422', async () => {
  const key = 'conditional-key-000001';
  const first = await send('PUT', '/v1/test/idem/conditional', { name: 'b' }, { 'idempotency-key': key, 'if-match': '"stale"' });
  assert.is(first.status, 412);
  await first.arrayBuffer();
  const same = await send('PUT', '/v1/test/idem/conditional', { name: 'b' }, { 'idempotency-key': key, 'if-match': '"stale"' });
  assert.equal([same.status, same.headers.get('idempotent-replayed')], [412, 'true'], 'an identical retry replays the refusal');
  await same.arrayBuffer();
  const changed = await send('PUT', '/v1/test/idem/conditional', { name: 'b' }, { 'idempotency-key': key, 'if-match': '"current"' });
  const body = (await jsonOf(changed)) as { error?: { code?: string } };
  assert.equal([changed.status, body.error?.code], [422, 'idempotency_key_reused'], `answered ${changed.status} ${JSON.stringify(body)}`);
});

test('OpenAPI: an operation that requires an Idempotency-Key declares the header required; its 409 (still running) carries Retry-After', async () => {
  const doc = buildOpenApiDocument(routes, { serverUrl: 'http://127.0.0.1', tags: {} }) as unknown as {
    paths: Record<string, Record<string, { parameters?: Array<{ $ref?: string; name?: string }>; responses: Record<string, { headers?: Record<string, unknown> }> }>>;
    components: { parameters: Record<string, { name: string; in: string; required?: boolean }> };
  };
  const keyOf = (path: string, method: string) => {
    const refs = (doc.paths[path]![method]!.parameters ?? []).map((p) => (p.$ref ? doc.components.parameters[p.$ref.split('/').at(-1)!]! : p));
    return refs.find((p) => p.name === 'Idempotency-Key') as { required?: boolean } | undefined;
  };
  assert.is(keyOf('/v1/test/idem/quota', 'post')?.required, true, 'required key declared required');
  assert.not.ok(keyOf('/v1/test/idem/conditional', 'put')?.required, 'optional key not declared required');
  assert.ok(doc.paths['/v1/test/idem/quota']!.post!.responses['409']!.headers?.['Retry-After'], '409 idempotency_request_in_progress names Retry-After');
  const lint = await redoclyLint(JSON.stringify(doc));
  assert.is(lint.totals.errors, 0, lint.problems.map((p) => p.message).join('; '));
});

test.run();
