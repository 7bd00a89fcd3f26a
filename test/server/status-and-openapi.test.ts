import { execFile } from 'node:child_process';
import { Agent, get } from 'node:http';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { combineParts } from '../../server/server.js';
import { defineRoute } from '../../transport/http/route.js';
import { counterKind } from '../fixtures/counter.kind.js';
import { counterRoutes } from '../fixtures/counter.routes.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);

/** A request that stays in flight until the test lets it go: it holds a drain open. */
let letGo: () => void = () => {};
/** Requests that reached the hold route's handler. */
let holding = 0;
const holdRoute = defineRoute({
  operationId: 'testHold',
  method: 'get',
  path: '/v1/test/hold',
  summary: 'Answers once the test lets it go',
  tags: ['Test'],
  credential: 'none',
  errorFormat: 'api',
  responses: { 204: { description: 'Let go.' } },
  handler: async () => {
    holding += 1;
    await new Promise<void>((resolve) => (letGo = resolve));
    return { status: 204, body: undefined };
  },
});
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(
    db.url,
    combineParts(productParts, { kinds: [counterKind], build: ({ host }) => ({ routes: [...counterRoutes(host), holdRoute] }) }),
    { OPS_TOKEN: 'operator-token-0123456789' },
  );
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

const ops = (p: string, token = 'operator-token-0123456789') => fetch(server.opsUrl + p, { headers: { authorization: `Bearer ${token}` } });

test('GET /v1/status answers a PlatformStatusResponse', async () => {
  const res = await fetch(`${server.url}/v1/status`);
  assert.is(res.status, 200);
  assert.is(res.headers.get('cache-control'), 'no-store');
  const body = await jsonOf(res);
  assert.is(body.status, 'ok');
  assert.is(body.apiVersion, '0.1.0-alpha.7');
  assert.is(body.mode, 'single-node');
  assert.is((body.checks as { storage: { status: string } }).storage.status, 'ok');
  assert.ok(!Number.isNaN(Date.parse(body.time as string)));
});

test('refusals made before a method is chosen take the path\'s own error body: Problems on first-table operations', async () => {
  const wrongMethod = await fetch(`${server.url}/v1/status`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.is(wrongMethod.status, 405);
  assert.is(wrongMethod.headers.get('allow'), 'GET, HEAD');
  assert.is(wrongMethod.headers.get('content-type'), 'application/problem+json');
  assert.is(((await wrongMethod.json()) as Record<string, unknown>).code, 'method_not_allowed');
  const badPath = await fetch(`${server.url}/v1/account/devices/%E0%A4%A`, { method: 'DELETE' });
  assert.is(badPath.status, 400);
  assert.is(badPath.headers.get('content-type'), 'application/problem+json');
  assert.is(((await badPath.json()) as Record<string, unknown>).code, 'path_invalid');
});

test('status reads share one storage check: a burst of them costs one query, not one each', async () => {
  const bodies = await Promise.all(Array.from({ length: 50 }, async () => (await jsonOf(await fetch(`${server.url}/v1/status`))) as { checks: { storage: { latencyMs: number } } }));
  // Each check measures its own latency; a burst inside one freshness window (two at most, straddling) shares it.
  const checks = new Set(bodies.map((b) => b.checks.storage.latencyMs));
  assert.ok(checks.size <= 2, `${checks.size} storage checks for 50 status reads`);
});

test('GET /ready is 200 while storage answers', async () => {
  const res = await fetch(`${server.url}/ready`);
  assert.is(res.status, 200);
  assert.is((await jsonOf(res)).status, 'ok');
});

test('GET /v1/openapi.json: OpenAPI 3.1.0, version 0.1.0-alpha.7, every route of the table, both error bodies', async () => {
  const res = await fetch(`${server.url}/v1/openapi.json`);
  assert.is(res.status, 200);
  const doc = (await res.json()) as {
    openapi: string;
    info: { version: string };
    paths: Record<string, Record<string, { operationId: string; responses: Record<string, { content?: Record<string, unknown> }> }>>;
    components: { schemas: Record<string, unknown> };
  };
  assert.is(doc.openapi, '3.1.0');
  assert.is(doc.info.version, '0.1.0-alpha.7');
  for (const path of ['/ready', '/v1/openapi.json', '/v1/status', '/v1/enrol/start', '/v1/enrol/complete', '/v1/account/devices/{deviceId}', '/v1/test-counters/{name}/add']) {
    assert.ok(doc.paths[path], path);
  }
  // Device-plane operations declare the spec's Problem responses and their credential.
  const complete = doc.paths['/v1/enrol/complete']!.post! as unknown as { security: unknown; responses: Record<string, { content?: Record<string, unknown> }> };
  assert.equal(complete.security, [{ deviceAssertion: [] }]);
  assert.ok(complete.responses['401']?.content?.['application/problem+json']);
  assert.is(doc.paths['/v1/status']!.get!.operationId, 'getPlatformStatus');
  // The status operations declare every Problem response of the spec's first tables.
  const statusResponses = doc.paths['/v1/status']!.get!.responses;
  for (const s of ['400', '401', '403', '404', '409', '422', '429', '500', '502', '503']) {
    assert.ok(statusResponses[s]?.content?.['application/problem+json'], `problem response ${s}`);
  }
  const add = doc.paths['/v1/test-counters/{name}/add']!.post!;
  assert.ok(add.responses['400']?.content?.['application/json'], 'validation errors of a management-style route are ApiErrors');
  assert.ok(add.responses['503']?.content?.['application/problem+json'], 'coordination failures are Problems');
  for (const name of ['Problem', 'ApiError', 'PlatformStatusResponse', 'TestCounterAddRequest']) assert.ok(doc.components.schemas[name], name);
});

/** The spec (Endpoints): "declare problem responses (`application/problem+json`) for `400` invalid request, …". */
const SPEC_PROBLEM_MEANINGS: Readonly<Record<string, string>> = {
  400: 'invalid request',
  401: 'authentication required',
  403: 'insufficient permission',
  404: 'resource not found',
  409: 'revision conflict',
  422: 'contract validation failed',
  429: 'rate limit exceeded',
  500: 'registry failure',
  502: 'configured upstream unavailable',
  503: 'runtime coordination unavailable',
};

test("the first tables' operations (up to POST /v1/auth/logout) declare each Problem response with the spec's meaning", async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { responses: Record<string, { description: string; content?: Record<string, unknown> }> }>>;
  };
  const firstTables: Array<[string, string]> = [
    ['/v1/status', 'get'],
    ['/v1/enrol/start', 'post'],
    ['/v1/enrol/complete', 'post'],
    ['/v1/enrol/pending', 'get'],
    ['/v1/enrol/approve', 'post'],
    ['/v1/account/devices', 'get'],
    ['/v1/account/devices/{deviceId}', 'delete'],
    ['/v1/account/devices/revoke-all', 'post'],
    ['/v1/account/page-session', 'post'],
    ['/v1/account/sign-out', 'post'],
    ['/v1/account/environments/{environmentId}/actor', 'get'],
    ['/v1/account/desktop-management-sessions', 'post'],
    ['/v1/account/desktop-management-sessions/{sessionId}', 'delete'],
    ['/v1/review/host-capabilities', 'post'],
    ['/v1/review/host-capabilities/{capabilityId}', 'delete'],
    ['/v1/auth/console-session', 'post'],
    ['/v1/auth/me', 'get'],
    ['/v1/auth/logout', 'post'],
  ];
  for (const [path, method] of firstTables) {
    const responses = doc.paths[path]![method]!.responses;
    for (const [status, meaning] of Object.entries(SPEC_PROBLEM_MEANINGS)) {
      const response = responses[status];
      assert.ok(response?.content?.['application/problem+json'], `${method} ${path} ${status}: a Problem`);
      assert.is(response.description, meaning, `${method} ${path} ${status}`);
    }
  }
  // Its own description of a status stays: /ready's 503 is the PlatformStatusResponse of a node that cannot serve.
  assert.is(doc.paths['/ready']!.get!.responses['503']!.description, 'The node cannot serve now.');
});

test('the served OpenAPI document passes `redocly lint` with no error and no warning', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'openapi-'));
  const file = path.join(dir, 'openapi.json');
  await writeFile(file, await (await fetch(`${server.url}/v1/openapi.json`)).text());
  const redocly = path.resolve('node_modules/.bin/redocly');
  const { stdout, stderr } = await run(redocly, ['lint', file, '--format', 'json', '--config', path.resolve('redocly.yaml')], {
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  }).catch((e: { stdout: string; stderr: string }) => e);
  const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ message: string; ruleId: string }> };
  assert.is(report.totals.errors, 0, JSON.stringify(report.problems) + stderr);
  assert.is(report.totals.warnings, 0, JSON.stringify(report.problems));
  // The one rule redocly.yaml turns off, kept in spirit: every operation answers success or a redirect.
  const doc = JSON.parse(await readFile(file, 'utf8')) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
  for (const [where, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      assert.ok(Object.keys(op.responses).some((s) => /^[23]\d\d$/.test(s)), `${method} ${where} has a 2XX or 3XX response`);
    }
  }
});

test('operator listener refuses a missing or wrong token', async () => {
  const none = await fetch(`${server.opsUrl}/actors`);
  assert.is(none.status, 401);
  assert.is(((await jsonOf(none)).error as { code: string }).code, 'operator_token_invalid');
  assert.is((await ops('/actors', 'wrong-token-0123456789')).status, 401);
});

test('operator listener: live actors by kind, persisted snapshot and journal of one actor', async () => {
  for (let i = 1; i <= 3; i++) {
    const res = await fetch(`${server.url}/v1/test-counters/inspected/add`, { method: 'POST', body: JSON.stringify({ amount: i }), headers: { 'content-type': 'application/json' } });
    assert.is(res.status, 200);
  }
  const list = await jsonOf(await ops('/actors?kind=counter'));
  assert.ok((list.kinds as string[]).includes('counter'));
  const actors = list.actors as Array<{ key: string; version: number; state: string }>;
  assert.ok(actors.some((a) => a.key === 'inspected' && a.version === 3 && a.state === 'counting'));
  assert.is((await ops('/actors?kind=nope')).status, 404);

  const detail = await jsonOf(await ops('/actors/counter/inspected'));
  const persisted = detail.persisted as { version: number; epoch: number; snapshot: { context: { total: number } } };
  assert.is(persisted.version, 3);
  assert.is(persisted.snapshot.context.total, 6);
  assert.ok((detail.live as { key: string }).key === 'inspected');

  const journal = await jsonOf(await ops('/actors/counter/inspected/journal?limit=2'));
  const entries = journal.entries as Array<{ version: number; event: { amount: number } }>;
  assert.equal(entries.map((e) => e.version), [3, 2]);
  assert.is(entries[0]!.event.amount, 3);
  assert.is(journal.nextBefore, 2);
  const older = await jsonOf(await ops('/actors/counter/inspected/journal?limit=2&before=2'));
  assert.equal((older.entries as Array<{ version: number }>).map((e) => e.version), [1]);
  assert.is((await ops('/actors/counter/never-seen')).status, 404);
  for (const path of ['/actors/no-such-kind/x', '/actors/no-such-kind/x/journal']) {
    const res = await ops(path);
    assert.is(res.status, 404, path);
    assert.is(((await res.json()) as { error: { code: string } }).error.code, 'actor_kind_unknown');
  }
});

test('operator listener: Prometheus metrics for requests, activations, commit batches and sockets', async () => {
  const res = await ops('/metrics');
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  for (const series of [
    /registry_http_requests_total\{method="POST",operation="testCounterAdd",status="200"\} \d+/,
    /registry_actor_activations_total\{kind="counter"\} \d+/,
    /registry_actors_live\{kind="counter"\} \d+/,
    /registry_commit_batch_actors_bucket\{le="1"\} \d+/,
    /registry_commit_duration_seconds_count \d+/,
    /# TYPE registry_websockets_open gauge/,
  ]) {
    assert.match(text, series);
  }
});

test('while the node drains, /ready answers 503 and /v1/status 200, both saying draining; other routes 503 server_draining', async () => {
  // The listener closes when the drain starts, so the probes go over a connection opened before it.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const probe = (path: string) =>
    new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
      get(`${server.url}${path}`, { agent }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
      }).on('error', reject);
    });
  assert.is((await probe('/ready')).status, 200);
  const held = fetch(`${server.url}/v1/test/hold`);
  // In flight means in its handler (a fixed 50 ms was not always enough on a loaded machine).
  await waitFor(() => holding > 0, 'the held request to reach its handler');
  const stopped = server.stop('drain test');
  try {
    const ready = await probe('/ready');
    assert.is(ready.status, 503);
    assert.is(ready.body.status, 'draining');
    const status = await probe('/v1/status');
    assert.is(status.status, 200);
    assert.is(status.body.status, 'draining');
    const other = await probe('/v1/openapi.json');
    assert.is(other.status, 503);
    assert.is(other.body.code, 'server_draining');
  } finally {
    letGo();
    assert.is((await held).status, 204, 'the request in flight finished');
    await stopped;
    agent.destroy();
  }
});

test.run();
