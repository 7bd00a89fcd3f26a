import { request as httpRequest } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The served OpenAPI document must describe what the gateway actually answers. For each probe, the status and
 * media type of the real response must be declared on that operation.
 */
let server: TestServer;
let doc: { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>> };

withTestServer(test, (started) => ({ server } = started), productParts);
test.before(async () => {
  doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as typeof doc;
});

function assertDeclared(method: string, path: string, status: number, contentType: string | null): void {
  const responses = doc.paths[path]?.[method]?.responses;
  assert.ok(responses, `${method.toUpperCase()} ${path} is in the document`);
  const declared = responses[String(status)];
  assert.ok(declared, `${method.toUpperCase()} ${path} answered ${status}, which its OpenAPI operation does not declare (declared: ${Object.keys(responses).join(', ')})`);
  const type = (contentType ?? '').split(';')[0]!.trim();
  const types = Object.keys(declared.content ?? {}).map((t) => t.split(';')[0]!.trim());
  assert.ok(types.includes(type), `${method.toUpperCase()} ${path} answered ${status} as ${type}, but the document declares ${status} only as ${types.join(', ')}`);
}

test('POST /v1/oidc/token with an unknown client_id: the 401 it answers is declared in the OpenAPI document', async () => {
  const res = await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=authorization_code&client_id=nobody&code=x&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb&code_verifier=' + 'a'.repeat(43),
  });
  const body = (await res.json()) as { code: string };
  assert.is(res.status, 401);
  assert.is(body.code, 'client_unknown');
  assertDeclared('post', '/v1/oidc/token', res.status, res.headers.get('content-type'));
});

test('GET /v1/oidc/authorize with a repeated client_id: its 400 (the error page) is declared in the OpenAPI document', async () => {
  const res = await fetch(`${server.url}/v1/oidc/authorize?client_id=a&client_id=b`);
  assert.is(res.status, 400);
  assert.match(await res.text(), /client_id/i, 'the page says what is wrong');
  assertDeclared('get', '/v1/oidc/authorize', res.status, res.headers.get('content-type'));
});

test('GET /v1/oidc/authorize with U+0000 in the query: its 400 body media type is declared in the OpenAPI document', async () => {
  // The operation answers such text itself (an error page here: no client to send it back to).
  const res = await fetch(`${server.url}/v1/oidc/authorize?state=%00`);
  assert.is(res.status, 400);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  await res.arrayBuffer();
  assertDeclared('get', '/v1/oidc/authorize', res.status, res.headers.get('content-type'));
});

function rawHeaders(method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${server.url}${path}`, { method, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a 204 carries no Content-Length (RFC 9110 §8.6: MUST NOT), as the HEAD path already ensures', async () => {
  // A plain OPTIONS on a path with cross-origin operations is answered 204 by the gateway itself.
  const res = await rawHeaders('OPTIONS', '/v1/runtime/session');
  assert.is(res.status, 204);
  assert.is(res.headers['content-length'], undefined, `204 sent Content-Length: ${String(res.headers['content-length'])}`);
});

test('a 304 does not claim Content-Length 0 for a representation that has content (RFC 9110 §8.6)', async () => {
  const path = '/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane';
  const full = await rawHeaders('GET', path);
  assert.is(full.status, 200);
  const etag = String(full.headers.etag);
  const notModified = await rawHeaders('GET', path, { 'if-none-match': etag });
  assert.is(notModified.status, 304);
  const length = notModified.headers['content-length'];
  assert.ok(length === undefined || length === full.headers['content-length'], `304 sent Content-Length: ${String(length)}; the 200 has ${String(full.headers['content-length'])}`);
});

test.run();
