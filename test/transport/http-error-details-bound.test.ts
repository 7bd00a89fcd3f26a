import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';

/**
 * A refusal names what is wrong member by member, but a request can hold a great many wrong members (a megabyte of
 * body is a hundred thousand unknown ones): listed whole, the answer was ten times the request, and it stays in memory
 * until the client reads it. The list is bounded; its message says how many there were.
 */
const Item = apiSchema('TestDetailsBoundItem', z.strictObject({ name: z.string() }));
const routes = [
  defineRoute({
    operationId: 'detailsBoundItem',
    method: 'post',
    path: '/v1/test/details-bound',
    summary: 'Item',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    body: Item,
    responses: { 200: { description: 'Item.', schema: Item } },
    handler: async ({ body }) => ({ status: 200, body }),
  }),
  defineRoute({
    operationId: 'detailsBoundProblem',
    method: 'get',
    path: '/v1/test/details-bound',
    summary: 'Item',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'problem',
    responses: { 200: { description: 'Item.', schema: Item } },
    handler: async () => ({ status: 200, body: { name: 'x' } }),
  }),
];

const MEGABYTE = 1024 * 1024;
/** What a refusal lists at most (transport/http/errors.ts). */
const MAX_ERROR_DETAILS = 100;
let db: TestDatabase;
let gateway: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  const idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateway = await startGateway({ routes, idempotency, maxBodyBytes: MEGABYTE });
});
test.after(async () => {
  gateway.close();
  await db.drop();
});

/** A JSON object of `count` unknown members, each short. */
function unknownMembers(count: number): string {
  return `{"name":"x",${Array.from({ length: count }, (_, i) => `"${i.toString(36)}":0`).join(',')}}`;
}

test('a body of a hundred thousand unknown members is refused with a bounded list of them, saying how many there were', async () => {
  const body = unknownMembers(100_000);
  assert.ok(body.length < MEGABYTE);
  const res = await fetch(`${gateway.url}/v1/test/details-bound`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  assert.is(res.status, 400);
  assert.ok(text.length < 32 * 1024, `a ${body.length}-byte request was answered with ${text.length} bytes`);
  const { error } = JSON.parse(text) as { error: { code: string; message: string; details: Array<{ pointer: string }> } };
  assert.is(error.code, 'validation_failed');
  assert.is(error.details.length, MAX_ERROR_DETAILS);
  assert.is(error.details[0]!.pointer, '/0', 'the first ones, in the order they were found');
  assert.match(error.message, /100000/);
});

test('the same bound on query parameters, in a Problem body; a short list is whole and its message unchanged', async () => {
  const query = Array.from({ length: 5_000 }, (_, i) => `q${i}=1`).join('&');
  const res = await fetch(`${gateway.url}/v1/test/details-bound?${query}`);
  const problem = (await res.json()) as { code: string; detail: string; errors: unknown[] };
  assert.is(res.status, 400);
  assert.is(problem.code, 'validation_failed');
  assert.is(problem.errors.length, MAX_ERROR_DETAILS);
  assert.match(problem.detail, /5000/);

  const few = await fetch(`${gateway.url}/v1/test/details-bound?a=1&b=2`);
  const short = (await few.json()) as { detail: string; errors: unknown[] };
  assert.is(short.errors.length, 2);
  assert.is(short.detail, 'this operation takes no query parameters');
});

test.run();
