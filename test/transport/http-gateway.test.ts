import { Agent, request as httpRequest } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { ActorFencedError } from '../../actors/errors.js';
import { systemClock } from '../../actors/clock.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { HttpError } from '../../transport/http/errors.js';
import { defineRoute } from '../../transport/http/route.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { counterRoutes } from '../fixtures/counter.routes.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { hostFor } from '../support/host.js';
import { jsonOf, startGateway, type TestGateway } from '../support/http.js';
import type { ActorHost } from '../../actors/actor-host.js';

const Echo = apiSchema('TestEcho', z.strictObject({ name: z.string().min(1).max(40), count: z.number().int().optional() }));
const Leaky = apiSchema('TestLeaky', z.object({ visible: z.string() }));

const echoRoute = (path: string, errorFormat: 'api' | 'problem', credential: 'none' | 'managementBearer' | 'environmentBackendGrant' = 'none') =>
  defineRoute({
    operationId: `echo${path.replace(/\W/g, '')}`,
    method: 'post',
    path,
    summary: 'Echo',
    tags: ['Test'],
    credential,
    errorFormat,
    body: Echo,
    responses: { 200: { description: 'Echoed.', schema: Echo } },
    handler: async ({ body }) => ({ status: 200, body }),
  });

const routes = [
  echoRoute('/v1/test/echo', 'api'),
  echoRoute('/v1/test/problem-echo', 'problem'),
  echoRoute('/v1/test/managed', 'api', 'managementBearer'),
  echoRoute('/v1/test/runtime', 'api', 'environmentBackendGrant'),
  defineRoute({
    operationId: 'items',
    method: 'get',
    path: '/v1/test/items/{itemId}',
    summary: 'Items',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    params: z.strictObject({ itemId: z.string().regex(/^itm_[a-z0-9]+$/) }),
    query: z.strictObject({ limit: z.coerce.number().int().min(1).max(100).optional() }),
    responses: { 200: { description: 'Item.', schema: Echo } },
    handler: async ({ params, query }) => ({ status: 200, body: { name: params.itemId, count: query.limit } }),
  }),
  defineRoute({
    operationId: 'noBody',
    method: 'post',
    path: '/v1/test/no-body',
    summary: 'Takes no body',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    responses: { 204: { description: 'Done.' } },
    handler: async () => ({ status: 204, body: undefined }),
  }),
  defineRoute({
    operationId: 'leaky',
    method: 'get',
    path: '/v1/test/leaky',
    summary: 'Returns more than its schema names',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    responses: { 200: { description: 'Leaky.', schema: Leaky } },
    handler: async () => ({ status: 200, body: { visible: 'yes', secret: 'internal' } as { visible: string } }),
  }),
  defineRoute({
    operationId: 'wrong',
    method: 'get',
    path: '/v1/test/wrong',
    summary: 'Returns a body that breaks its schema',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    responses: { 200: { description: 'Wrong.', schema: Leaky } },
    handler: async () => ({ status: 200, body: { visible: 42 } as unknown as { visible: string } }),
  }),
  defineRoute({
    operationId: 'crash',
    method: 'get',
    path: '/v1/test/crash',
    summary: 'Throws',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    responses: { 200: { description: 'Never.', schema: Leaky } },
    handler: async () => {
      throw new Error('database password is hunter2');
    },
  }),
  defineRoute({
    operationId: 'refuse',
    method: 'post',
    path: '/v1/test/refuse',
    summary: 'Refuses, idempotently',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    idempotency: 'optional',
    body: Echo,
    responses: { 200: { description: 'Never.', schema: Echo } },
    handler: async () => {
      throw new HttpError(409, 'echo_refused', 'this echo is refused, every time');
    },
  }),
  defineRoute({
    operationId: 'fenced',
    method: 'get',
    path: '/v1/test/fenced',
    summary: 'Loses its fence',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    responses: { 200: { description: 'Never.', schema: Leaky } },
    handler: async () => {
      throw new ActorFencedError('counter\u0000x');
    },
  }),
  defineRoute({
    operationId: 'append',
    method: 'post',
    path: '/v1/test/append',
    summary: 'Appends, as the spec\'s keyed operations do: 201 appended, 200 replay',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    idempotency: 'required',
    body: Echo,
    responses: { 201: { description: 'Appended.', schema: Echo } },
    handler: async ({ body }) => ({ status: 201, body: { ...body, name: `${body.name}-${++appended}` } }),
  }),
];
let appended = 0;

let db: TestDatabase;
let host: ActorHost;
let server: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  host = hostFor(new PostgresActorStore(db.connection), systemClock, [counterKind]);
  server = await startGateway({
    routes: [...routes, ...counterRoutes(host)],
    idempotency: new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 }),
    maxBodyBytes: 1024,
    verifiers: {
      managementBearer: (req) => {
        if (req.headers.authorization !== 'Bearer good') throw new HttpError(401, 'management_token_invalid', 'a valid management bearer is required', { family: 'management' });
        return { credential: 'managementBearer', subject: 'acct_1', accountId: 'acct_1', grantId: 'grt_1', scopes: ['management'] };
      },
      environmentBackendGrant: (req) => {
        if (req.headers.authorization !== 'Bearer runtime') throw new HttpError(401, 'runtime_token_invalid', 'runtime token invalid', { family: 'runtime' });
        return { credential: 'environmentBackendGrant', subject: 'acct_1' };
      },
    },
  });
});
test.after(async () => {
  server.close();
  await host.drain();
  await db.drop();
});

const post = (path: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(server.url + path, { method: 'POST', body, headers });

function assertApiError(body: Record<string, unknown>, status: number, code: string, requestId: string | null): void {
  const error = body.error as Record<string, unknown>;
  assert.ok(error, 'nested ApiError body');
  assert.is(error.code, code);
  assert.is(error.status, status);
  assert.is(error.requestId, requestId);
  assert.type(error.message, 'string');
}

function assertProblem(body: Record<string, unknown>, status: number, code: string, requestId: string | null): void {
  assert.is(body.code, code);
  assert.is(body.status, status);
  assert.is(body.requestId, requestId);
  assert.is(body.type, `https://registry.platform.invalid/problems/${code}`);
  assert.type(body.title, 'string');
  assert.type(body.detail, 'string');
}

test('unknown route: 404 ApiError with a request id in body and header', async () => {
  const res = await fetch(`${server.url}/v1/nothing-here`);
  assert.is(res.status, 404);
  assert.is(res.headers.get('content-type'), 'application/json');
  const id = res.headers.get('x-request-id');
  assert.match(id ?? '', /^req_[A-Za-z0-9_-]{16}$/);
  assertApiError(await jsonOf(res), 404, 'route_not_found', id);
});

test('wrong method: 405 with Allow; HEAD is GET without its body', async () => {
  const res = await fetch(`${server.url}/v1/test/echo`);
  assert.is(res.status, 405);
  assert.is(res.headers.get('allow'), 'POST');
  assertApiError(await jsonOf(res), 405, 'method_not_allowed', res.headers.get('x-request-id'));

  const get = await fetch(`${server.url}/v1/test/items/itm_1?limit=3`);
  const head = await fetch(`${server.url}/v1/test/items/itm_1?limit=3`, { method: 'HEAD' });
  assert.is(head.status, 200);
  assert.is(head.headers.get('content-type'), get.headers.get('content-type'));
  assert.is(head.headers.get('content-length'), String((await get.arrayBuffer()).byteLength));
  assert.is((await head.arrayBuffer()).byteLength, 0);
  assert.match(head.headers.get('x-request-id') ?? '', /^req_/);
  // A refusal keeps its status and headers, still without a body; a route with no GET does not take HEAD.
  const badHead = await fetch(`${server.url}/v1/test/items/nope`, { method: 'HEAD' });
  assert.is(badHead.status, 400);
  assert.is((await badHead.arrayBuffer()).byteLength, 0);
  const noGet = await fetch(`${server.url}/v1/test/echo`, { method: 'HEAD' });
  assert.is(noGet.status, 405);
  const withGet = await fetch(`${server.url}/v1/test/items/itm_1`, { method: 'DELETE' });
  assert.is(withGet.headers.get('allow'), 'GET, HEAD');

  // A HEAD response is finished: the next request on the same keep-alive connection is answered.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<unknown>();
  const onOne = (method: string, path: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${server.url}${path}`, { method, agent }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('socket', (socket) => sockets.add(socket));
      req.setTimeout(3_000, () => req.destroy(new Error(`${method} ${path} got no answer`)));
      req.on('error', reject);
      req.end();
    });
  try {
    assert.equal(await onOne('HEAD', '/v1/test/items/itm_1'), { status: 200, body: '' });
    assert.equal(await onOne('HEAD', '/v1/nothing-here'), { status: 404, body: '' });
    const after = await onOne('GET', '/v1/test/items/itm_1?limit=2');
    assert.is(after.status, 200);
    assert.equal(JSON.parse(after.body), { name: 'itm_1', count: 2 });
    assert.is(sockets.size, 1, 'all three on one connection');
  } finally {
    agent.destroy();
  }
});

test('malformed JSON: 400 malformed_json, in the route format (ApiError and Problem)', async () => {
  const api = await post('/v1/test/echo', '{"name": ');
  assert.is(api.status, 400);
  assertApiError(await jsonOf(api), 400, 'malformed_json', api.headers.get('x-request-id'));
  const problem = await post('/v1/test/problem-echo', '{"name": ');
  assert.is(problem.status, 400);
  assert.is(problem.headers.get('content-type'), 'application/problem+json');
  assertProblem(await jsonOf(problem), 400, 'malformed_json', problem.headers.get('x-request-id'));
});

test('invalid UTF-8 body: 400 malformed_json', async () => {
  const res = await fetch(`${server.url}/v1/test/echo`, {
    method: 'POST',
    body: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    headers: { 'content-type': 'application/json' },
  });
  assert.is(res.status, 400);
  assertApiError(await jsonOf(res), 400, 'malformed_json', res.headers.get('x-request-id'));
});

test('wrong content type: 415 unsupported_media_type; JSON is recognised as RFC 9110 spells it (any case, charset quoted or not)', async () => {
  const res = await post('/v1/test/echo', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' });
  assert.is(res.status, 415);
  assertApiError(await jsonOf(res), 415, 'unsupported_media_type', res.headers.get('x-request-id'));
  const latin1 = await post('/v1/test/echo', '{"name":"x"}', { 'content-type': 'application/json; charset=iso-8859-1' });
  assert.is(latin1.status, 415, 'a charset other than UTF-8');
  // RFC 9110 5.6.6 and 8.3.1: a parameter value is the same quoted or not; type, subtype and parameter name ignore case.
  for (const type of ['application/json; charset="utf-8"', 'Application/JSON;Charset="UTF-8"', 'application/json;charset=utf-8']) {
    const accepted = await post('/v1/test/echo', '{"name":"x"}', { 'content-type': type });
    assert.is(accepted.status, 200, type);
  }
});

test('oversized body by Content-Length: 413 before reading it', async () => {
  const res = await post('/v1/test/echo', JSON.stringify({ name: 'x'.repeat(2000) }));
  assert.is(res.status, 413);
  assertApiError(await jsonOf(res), 413, 'body_too_large', res.headers.get('x-request-id'));
});

test('oversized chunked body: 413 while streaming', async () => {
  const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest(`${server.url}/v1/test/echo`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.write('{"name":"');
    req.write('y'.repeat(4000));
    req.end('"}');
  });
  assert.is(status, 413);
  assert.is((JSON.parse(body) as { error: { code: string } }).error.code, 'body_too_large');
});

test('unknown members of a strict body: 400 validation_failed naming each by JSON Pointer', async () => {
  const res = await post('/v1/test/echo', JSON.stringify({ name: 'ok', extra: 1, other: true }));
  assert.is(res.status, 400);
  const body = await jsonOf(res);
  assertApiError(body, 400, 'validation_failed', res.headers.get('x-request-id'));
  const details = (body.error as { details: Array<{ pointer: string; in: string; code: string }> }).details;
  assert.equal(details.map((d) => d.pointer).sort(), ['/extra', '/other']);
  assert.ok(details.every((d) => d.in === 'body' && d.code === 'unrecognized'));
});

test('type errors in the body and bad path/query parameters: 400 with details', async () => {
  const res = await post('/v1/test/echo', JSON.stringify({ name: 5 }));
  assert.is(res.status, 400);
  const details = ((await jsonOf(res)).error as { details: Array<{ pointer: string; in: string; code: string }> }).details;
  assert.equal(details.map((d) => [d.pointer, d.in, d.code]), [['/name', 'body', 'invalid_type']]);
  const path = await fetch(`${server.url}/v1/test/items/NOPE`);
  assert.is(path.status, 400);
  assert.is(((await jsonOf(path)).error as { details: Array<{ in: string }> }).details[0]!.in, 'path');
  const query = await fetch(`${server.url}/v1/test/items/itm_1?limit=1000`);
  assert.is(query.status, 400);
  const unknown = await fetch(`${server.url}/v1/test/items/itm_1?sort=asc`);
  assert.is(unknown.status, 400);
  assert.is(((await jsonOf(unknown)).error as { details: Array<{ pointer: string }> }).details[0]!.pointer, '/sort');
  const ok = await fetch(`${server.url}/v1/test/items/itm_1?limit=5`);
  assert.is(ok.status, 200);
  assert.equal(await ok.json(), { name: 'itm_1', count: 5 });
});

test('a body sent to an operation that takes none is refused; an empty one is fine', async () => {
  const refused = await post('/v1/test/no-body', '{"x":1}');
  assert.is(refused.status, 400);
  assertApiError(await jsonOf(refused), 400, 'body_not_allowed', refused.headers.get('x-request-id'));
  const ok = await fetch(`${server.url}/v1/test/no-body`, { method: 'POST' });
  assert.is(ok.status, 204);
  assert.is(await ok.text(), '');
});

test('credential refused: management failures are ApiErrors, runtime failures are Problems', async () => {
  const managed = await post('/v1/test/managed', JSON.stringify({ name: 'x' }));
  assert.is(managed.status, 401);
  assertApiError(await jsonOf(managed), 401, 'management_token_invalid', managed.headers.get('x-request-id'));
  const runtime = await post('/v1/test/runtime', JSON.stringify({ name: 'x' }));
  assert.is(runtime.status, 401);
  assert.is(runtime.headers.get('content-type'), 'application/problem+json');
  assertProblem(await jsonOf(runtime), 401, 'runtime_token_invalid', runtime.headers.get('x-request-id'));
  const ok = await post('/v1/test/managed', JSON.stringify({ name: 'x' }), { 'content-type': 'application/json', authorization: 'Bearer good' });
  assert.is(ok.status, 200);
});

test('credentials are checked before the body is validated', async () => {
  const res = await post('/v1/test/managed', '{"broken');
  assert.is(res.status, 401);
});

test('responses are parsed by their schema: undeclared members never leak', async () => {
  const res = await fetch(`${server.url}/v1/test/leaky`);
  assert.equal(await res.json(), { visible: 'yes' });
});

test('a handler bug becomes a 500 internal_error that reveals nothing', async () => {
  for (const path of ['/v1/test/crash', '/v1/test/wrong']) {
    const res = await fetch(server.url + path);
    assert.is(res.status, 500);
    const body = await jsonOf(res);
    assertApiError(body, 500, 'internal_error', res.headers.get('x-request-id'));
    assert.not.match(JSON.stringify(body), /hunter2|visible/);
  }
});

test('a lost fence is a retryable 503 Problem, whatever the route format', async () => {
  const res = await fetch(`${server.url}/v1/test/fenced`);
  assert.is(res.status, 503);
  assert.is(res.headers.get('retry-after'), '1');
  assert.is(res.headers.get('content-type'), 'application/problem+json');
  assertProblem(await jsonOf(res), 503, 'actor_fenced', res.headers.get('x-request-id'));
});

test('Idempotency-Key: malformed keys are refused; 16 to 128 of A-Z a-z 0-9 . _ ~ - are taken', async () => {
  for (const key of ['short', 'x'.repeat(15), 'has spaces in it!!', 'x'.repeat(129), 'ünïcödé-key-1234567', 'slash/in/the/key/1']) {
    const res = await post('/v1/test-counters/idem-bad/add', JSON.stringify({ amount: 1 }), { 'content-type': 'application/json', 'idempotency-key': key });
    assert.is(res.status, 400, key);
    assertApiError(await jsonOf(res), 400, 'idempotency_key_invalid', res.headers.get('x-request-id'));
  }
  for (const key of ['A.b_c~d-e0123456', `${'Zz9._~-'.repeat(18)}xy`]) {
    assert.is(key.length === 16 || key.length === 128, true, key);
    const res = await post('/v1/test-counters/idem-edge/add', JSON.stringify({ amount: 1 }), { 'content-type': 'application/json', 'idempotency-key': key });
    assert.is(res.status, 200, `${key.length}-character key`);
  }
});

test('Idempotency-Key: an identical retry replays the stored result without applying the event again', async () => {
  const headers = { 'content-type': 'application/json', 'idempotency-key': 'retry-key-0000000001' };
  const first = await post('/v1/test-counters/idem/add', JSON.stringify({ amount: 3 }), headers);
  assert.is(first.status, 200);
  const firstBody = await first.json();
  // Same request, members in another order: still the same request.
  const again = await post('/v1/test-counters/idem/add', '{ "amount" : 3 }', headers);
  assert.is(again.status, 200);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(await again.json(), firstBody);
  const other = await post('/v1/test-counters/idem/add', JSON.stringify({ amount: 1 }));
  assert.equal(((await other.json()) as { version: number; total: number }).total, 4, 'the replay did not add 3 again');

  // What was created is replayed as 200, same body, and not created again (the spec: "201 appended, 200 replay").
  const appendHeaders = { 'content-type': 'application/json', 'idempotency-key': 'retry-key-0000000005' };
  const made = await post('/v1/test/append', JSON.stringify({ name: 'entry' }), appendHeaders);
  assert.is(made.status, 201);
  const madeBody = await made.json();
  const madeAgain = await post('/v1/test/append', JSON.stringify({ name: 'entry' }), appendHeaders);
  assert.equal([madeAgain.status, madeAgain.headers.get('idempotent-replayed'), await madeAgain.json()], [200, 'true', madeBody]);
  assert.is(appended, 1);

  // A refusal is a result too: replayed with the same code, under the request id of the retry (body and header).
  const refusalHeaders = { 'content-type': 'application/json', 'idempotency-key': 'retry-key-0000000004' };
  const refused = await post('/v1/test/refuse', JSON.stringify({ name: 'x' }), refusalHeaders);
  assertApiError(await jsonOf(refused), 409, 'echo_refused', refused.headers.get('x-request-id'));
  const replayed = await post('/v1/test/refuse', JSON.stringify({ name: 'x' }), refusalHeaders);
  assert.is(replayed.headers.get('idempotent-replayed'), 'true');
  assert.is.not(replayed.headers.get('x-request-id'), refused.headers.get('x-request-id'));
  assertApiError(await jsonOf(replayed), 409, 'echo_refused', replayed.headers.get('x-request-id'));
});

test('Idempotency-Key: a different request under the same key is refused with 422', async () => {
  const headers = { 'content-type': 'application/json', 'idempotency-key': 'retry-key-0000000002' };
  assert.is((await post('/v1/test-counters/idem-2/add', JSON.stringify({ amount: 3 }), headers)).status, 200);
  const changed = await post('/v1/test-counters/idem-2/add', JSON.stringify({ amount: 4 }), headers);
  assert.is(changed.status, 422);
  assertApiError(await jsonOf(changed), 422, 'idempotency_key_reused', changed.headers.get('x-request-id'));
  const otherPath = await post('/v1/test-counters/idem-3/add', JSON.stringify({ amount: 3 }), headers);
  assert.is(otherPath.status, 422, 'same key, same operation, other resource: a different request');
  const otherOperation = await post('/v1/test/refuse', JSON.stringify({ name: 'x' }), headers);
  assert.is(otherOperation.status, 422, 'same key, another operation: a different request');
  assertApiError(await jsonOf(otherOperation), 422, 'idempotency_key_reused', otherOperation.headers.get('x-request-id'));
});

test('Idempotency-Key: concurrent identical requests apply once', async () => {
  const headers = { 'content-type': 'application/json', 'idempotency-key': 'retry-key-0000000003' };
  const results = await Promise.all(Array.from({ length: 8 }, () => post('/v1/test-counters/idem-race/add', JSON.stringify({ amount: 5 }), headers)));
  const statuses = results.map((r) => r.status);
  assert.ok(statuses.every((s) => s === 200 || s === 409), statuses.join(','));
  for (const r of results.filter((x) => x.status === 409)) {
    assertApiError(await jsonOf(r), 409, 'idempotency_request_in_progress', r.headers.get('x-request-id'));
  }
  const after = await post('/v1/test-counters/idem-race/add', JSON.stringify({ amount: 1 }));
  assert.is(((await after.json()) as { total: number }).total, 6, 'applied exactly once');
});

test('Idempotency-Key: keys are scoped per caller', async () => {
  const rows = await db.connection.db.selectFrom('idempotency_records').select(['scope']).where('key', '=', 'retry-key-0000000001').execute();
  assert.equal(rows.map((r) => r.scope), ['anonymous'], 'one key space per caller, across operations');
});

test.run();
