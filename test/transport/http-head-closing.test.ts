import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rawExchange, startGateway, type TestGateway } from '../support/http.js';

/**
 * A HEAD answer that promises `Connection: close` keeps it like any other: a framing refusal (where a proxy in front may
 * read the request's end elsewhere, and what follows must not be served as a request of its own), a body over the limit,
 * a body sent to no operation. The HEAD answer has no body, and uWS closes a connection only through an answer it ends
 * itself: written as HEAD answers usually are, the connection stayed open.
 */
const Item = apiSchema('TestHeadClosingItem', z.strictObject({ name: z.string() }));
const routes = [
  defineRoute({
    operationId: 'headClosingItem',
    method: 'get',
    path: '/v1/test/head-closing/{itemId}',
    summary: 'Item',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    params: z.strictObject({ itemId: z.string() }),
    responses: { 200: { description: 'Item.', schema: Item } },
    handler: async ({ params }) => ({ status: 200, body: { name: params.itemId } }),
  }),
];

let db: TestDatabase;
let gateway: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  const idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateway = await startGateway({ routes, idempotency, maxBodyBytes: 1024 });
});
test.after(async () => {
  gateway.close();
  await db.drop();
});

const exchange = (request: string, later = '', ms = 2_000) => rawExchange(Number(new URL(gateway.url).port), request, { later, ms });

const smuggled = 'GET /v1/test/head-closing/SMUGGLED HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

test('HEAD with Content-Length values that differ: 400, the connection closes, and what follows is never served', async () => {
  const request = `HEAD /v1/test/head-closing/a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: ${5 + smuggled.length}\r\n\r\nhello`;
  const { text, closed } = await exchange(request, smuggled);
  assert.match(text, /^HTTP\/1\.1 400 /);
  assert.match(text.toLowerCase(), /\r\nconnection: close\r\n/);
  assert.match(text.toLowerCase(), /\r\nx-request-id: req_/);
  assert.not.match(text, /SMUGGLED/, 'the bytes after the first length were served as a request');
  assert.ok(closed, 'the connection stayed open');
});

test('HEAD with a transfer coding the server does not apply: 400 and the connection closes', async () => {
  const { text, closed } = await exchange(`HEAD /v1/test/head-closing/a HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`, smuggled);
  assert.match(text, /^HTTP\/1\.1 400 /);
  assert.not.match(text, /SMUGGLED/);
  assert.ok(closed, 'the connection stayed open');
});

test('HEAD with a body over the limit (413) or sent to no operation (404): the body is not read, the connection closes', async () => {
  for (const [path, status] of [['/v1/test/head-closing/a', '413'], ['/v1/test/nowhere', '404']] as const) {
    const { text, closed } = await exchange(`HEAD ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500000000\r\n\r\n`, 'x'.repeat(64 * 1024));
    assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), path);
    assert.ok(closed, `${status}: the connection stayed open, reading the body`);
  }
});

test('a HEAD without a body is answered with GET\'s headers, no body, and keeps its connection', async () => {
  const { text, closed } = await exchange('HEAD /v1/test/head-closing/abc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', '', 800);
  assert.match(text, /^HTTP\/1\.1 200 /);
  assert.match(text.toLowerCase(), /\r\ncontent-length: 14\r\n/);
  assert.ok(text.endsWith('\r\n\r\n'), 'no body');
  assert.is(closed, false);
});

test.run();
