import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rawExchange, startGateway, type TestGateway } from '../support/http.js';

/**
 * How a request says where its body ends (Content-Length, Transfer-Encoding), read by uWS more leniently than RFC 9112
 * allows: two Content-Length values that differ (uWS takes the first), a transfer coding besides `chunked` (uWS
 * decodes the chunks and leaves the coding undone). A proxy in front that reads the framing the other way sees a
 * different request boundary, and the bytes in between become a request of their own (request smuggling). RFC 9112
 * 6.1 and 6.3: such a request is refused (400) and the connection closes.
 */
const Echo = apiSchema('TestFramingEcho', z.strictObject({ name: z.string() }));
const routes = [
  defineRoute({
    operationId: 'framingEcho',
    method: 'post',
    path: '/v1/test/framing-echo',
    summary: 'Echo',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    body: Echo,
    responses: { 200: { description: 'Echoed.', schema: Echo } },
    handler: async ({ body }) => ({ status: 200, body }),
  }),
  defineRoute({
    operationId: 'framingItem',
    method: 'get',
    path: '/v1/test/framing-items/{itemId}',
    summary: 'Item',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    params: z.strictObject({ itemId: z.string() }),
    responses: { 200: { description: 'Item.', schema: Echo } },
    handler: async ({ params }) => ({ status: 200, body: { name: params.itemId } }),
  }),
];

let db: TestDatabase;
let gateway: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  const idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateway = await startGateway({ routes, idempotency });
});
test.after(async () => {
  gateway.close();
  await db.drop();
});

const exchange = (request: string, ms = 2_000) => rawExchange(Number(new URL(gateway.url).port), request, { ms });

const smuggled = 'GET /v1/test/framing-items/SMUGGLED HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
const body = '{"name":"ab"}';

test('two Content-Length values that differ: 400 content_length_invalid, and the connection closes', async () => {
  const request =
    'POST /v1/test/framing-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    `Content-Length: ${body.length}\r\nContent-Length: ${body.length + 5}\r\n\r\n${body}`;
  const { text, closed } = await exchange(request);
  assert.match(text, /^HTTP\/1\.1 400 /);
  assert.match(text, /"code":"content_length_invalid"/);
  assert.match(text, /"requestId":"req_/);
  assert.match(text, /\r\nconnection: close\r\n/i);
  assert.ok(closed, 'the server closed the connection');
});

test('what follows the first of two differing Content-Lengths is never served as a request of its own', async () => {
  for (const lengths of [[body.length, body.length + smuggled.length], [body.length + smuggled.length, body.length]]) {
    const request =
      'POST /v1/test/framing-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      `Content-Length: ${lengths[0]}\r\nContent-Length: ${lengths[1]}\r\n\r\n${body}${smuggled}`;
    const { text, closed } = await exchange(request);
    assert.not.match(text, /SMUGGLED/, `${lengths}: the bytes after the first length were not served`);
    assert.not.match(text, /HTTP\/1\.1 200 /, `${lengths}`);
    assert.ok(closed, `${lengths}: the server closed the connection`);
  }
});

test('the same Content-Length twice is one length (RFC 9112 6.3): served', async () => {
  const request =
    'POST /v1/test/framing-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    `Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const { text } = await exchange(request, 500);
  assert.match(text, /^HTTP\/1\.1 200 /);
  assert.match(text, /\{"name":"ab"\}$/);
});

test('a transfer coding besides chunked: 400 (one the server does not apply, chunked not last or not alone), the connection closes', async () => {
  const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  for (const [coding, status, code] of [
    ['gzip, chunked', 400, 'transfer_coding_unsupported'],
    ['chunked, gzip', 400, 'transfer_coding_invalid'],
    ['xchunked', 400, 'transfer_coding_invalid'],
    ['chunked, chunked', 400, 'transfer_coding_invalid'],
  ] as const) {
    const request =
      'POST /v1/test/framing-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      `Transfer-Encoding: ${coding}\r\n\r\n${chunked}`;
    const { text, closed } = await exchange(request);
    assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), coding);
    assert.match(text, new RegExp(`"code":"${code}"`), coding);
    assert.ok(closed, `${coding}: the server closed the connection`);
    // With a request behind it: that one is never served (uWS drops the connection, or it closes after the 400).
    const behind = await exchange(request + smuggled);
    assert.not.match(behind.text, /SMUGGLED/, coding);
    assert.ok(behind.closed, `${coding}: closed with a request behind it`);
  }
});

test('chunked in any letter case, alone, is read as before', async () => {
  for (const coding of ['chunked', 'Chunked', 'CHUNKED']) {
    const request =
      'POST /v1/test/framing-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      `Transfer-Encoding: ${coding}\r\n\r\n5\r\n{"nam\r\n8\r\ne":"ab"}\r\n0\r\n\r\n`;
    const { text } = await exchange(request, 500);
    assert.match(text, /^HTTP\/1\.1 200 /, coding);
    assert.match(text, /\{"name":"ab"\}$/, coding);
  }
});

test('a body sent to no operation (404, 405) is not read: the answer closes the connection instead of reading what may be gigabytes', async () => {
  const head = (path: string, method = 'POST') => `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{"name":`;
  for (const [request, status] of [[head('/v1/test/nowhere'), '404'], [head('/v1/test/framing-items/x', 'PUT'), '405']] as const) {
    const { text, closed } = await exchange(request, 3_000);
    assert.ok(text.startsWith(`HTTP/1.1 ${status}`), text);
    assert.match(text.toLowerCase(), /\r\nconnection: close\r\n/);
    assert.ok(closed, `${status}: the connection stayed open, reading the body`);
  }
  // Without a body, the connection is kept as usual.
  const { text, closed } = await exchange('GET /v1/test/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 1_000);
  assert.ok(text.startsWith('HTTP/1.1 404'), text);
  assert.is(closed, false);
});

test.run();
