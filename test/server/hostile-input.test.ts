import { connect } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * What clients get wrong on purpose or by accident, through the real server: requests that once reached Postgres or
 * stayed in flight for ever. Found by throwing malformed input at every operation.
 */
const OPS_TOKEN = 'operator-token-0123456789';
let server: TestServer;

const MAX_BODY_BYTES = 4096;
withTestServer(test, (started) => ({ server } = started), productParts, { OPS_TOKEN, MAX_BODY_BYTES: String(MAX_BODY_BYTES) });

interface Refusal {
  readonly status: number;
  readonly code: unknown;
  readonly details: unknown;
}

async function refusalOf(res: Response): Promise<Refusal> {
  const body = (await res.json()) as Record<string, unknown> & { error?: Record<string, unknown> };
  // The nested ApiError carries `details`; a flat Problem, `errors`.
  if (body.error && typeof body.error === 'object') return { status: res.status, code: body.error.code, details: body.error.details };
  return { status: res.status, code: body.code, details: body.errors };
}

const unstorable = (pointer: string, part: string) => [{ pointer, in: part, code: 'unstorable_text', message: 'contains U+0000 or an unpaired UTF-16 surrogate' }];

test('text Postgres cannot keep (U+0000, an unpaired surrogate) is a 400 wherever it enters: path, query, JSON or form body', async () => {
  const ops = { authorization: `Bearer ${OPS_TOKEN}` };
  const path = await refusalOf(await fetch(`${server.opsUrl}/actors/runtime-session/a%00b`, { headers: ops }));
  assert.equal(path, { status: 400, code: 'validation_failed', details: unstorable('/key', 'path') });
  const query = await refusalOf(await fetch(`${server.opsUrl}/registry/audit?target=%00`, { headers: ops }));
  assert.equal(query, { status: 400, code: 'validation_failed', details: unstorable('/target', 'query') });

  const authorize = new URLSearchParams({ response_type: 'code', client_id: 'a\u0000b', redirect_uri: 'https://a.example', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' });
  const page = await fetch(`${server.url}/v1/oidc/authorize?${authorize}`, { redirect: 'manual' });
  assert.is(page.status, 400);

  const form = new URLSearchParams({ grant_type: 'refresh_token', client_id: '\u0000', refresh_token: 'x' });
  const token = await fetch(`${server.url}/v1/oidc/token`, { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const tokenBody = (await token.json()) as Record<string, unknown>;
  assert.is(token.status, 400);
  assert.is(tokenBody.error, 'invalid_request', 'OAuth clients read RFC 6749 errors');
  assert.is(tokenBody.code, 'validation_failed');

  // JSON escapes, as a client's UTF-8 encoder would have replaced a real lone surrogate.
  const enrol = await fetch(`${server.url}/v1/enrol/start`, {
    method: 'POST',
    body: '{"handle":"someone","device":{"name":"laptop \\ud800","publicKey":{}}}',
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(await refusalOf(enrol), { status: 400, code: 'validation_failed', details: unstorable('/device/name', 'body') });
  // The pointer names the first offender in document order, member names escaped (RFC 6901), and a name can offend.
  for (const [body, pointer] of [
    ['{"handle":"ok","device":{"a/b~c":["fine","\\udc00"],"name":"\\u0000"}}', '/device/a~1b~0c/1'],
    ['{"handle":"ok","device":{"na\\u0000me":"laptop"}}', '/device/na\u0000me'],
  ] as const) {
    const refused = await fetch(`${server.url}/v1/enrol/start`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    assert.equal(await refusalOf(refused), { status: 400, code: 'validation_failed', details: unstorable(pointer, 'body') });
  }

  const ready = await fetch(`${server.url}/ready`);
  assert.is(ready.status, 200);
});

test('a client that goes away in the middle of its body leaves no request in flight', async () => {
  const inFlight = async (): Promise<number> => {
    const text = await (await fetch(`${server.opsUrl}/metrics`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } })).text();
    const line = text.split('\n').find((l) => l.startsWith('registry_http_requests_in_flight'));
    return Number(line?.split(' ').at(-1));
  };
  assert.is(await inFlight(), 0);
  const port = new URL(server.url).port;
  const sockets = Array.from({ length: 3 }, () => connect(Number(port), '127.0.0.1'));
  for (const socket of sockets) {
    socket.write('POST /v1/auth/passports/introspect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pass');
  }
  await waitFor(async () => (await inFlight()) === 3, 'the partial requests to be received');
  for (const socket of sockets) socket.destroy();
  await waitFor(async () => (await inFlight()) === 0, 'abandoned requests to leave the in-flight count');
});

test('a parameter or member named __proto__ (plain or escaped) is 400 validation_failed naming it: query, form body, JSON body', async () => {
  const ops = { authorization: `Bearer ${OPS_TOKEN}` };
  const query = await refusalOf(await fetch(`${server.opsUrl}/registry/audit?__proto__=x`, { headers: ops }));
  const form = await fetch(`${server.url}/v1/oidc/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=authorization_code&code=c&__proto__=x',
  });
  const formBody = (await form.json()) as Record<string, unknown>;
  const escaped = await refusalOf(
    await fetch(`${server.opsUrl}/registry/environments`, {
      method: 'POST',
      headers: { ...ops, 'content-type': 'application/json' },
      body: '{"environmentId":"proto-env","origin":"https://proto.example","ownerHandle":"nobody","redirectUris":[],"\\u005f_proto__":{"admin":true}}',
    }),
  );
  assert.equal(query, { status: 400, code: 'validation_failed', details: [{ pointer: '/__proto__', in: 'query', code: 'unrecognized', message: '`__proto__` is not a parameter any request takes' }] });
  assert.equal([form.status, formBody.code], [400, 'validation_failed'], JSON.stringify(formBody));
  assert.equal(escaped.status, 400);
  assert.is(escaped.code, 'validation_failed');
  assert.equal((escaped.details as Array<{ pointer: string }>).map((d) => d.pointer), ['/__proto__']);
});

test('MAX_BODY_BYTES bounds a request body: one byte over is 413 body_too_large, at the limit it is read', async () => {
  const sized = (bytes: number) => JSON.stringify({ passport: 'x'.repeat(bytes - JSON.stringify({ passport: '' }).length) });
  const post = (body: string) => fetch(`${server.url}/v1/auth/passports/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  assert.equal(await refusalOf(await post(sized(MAX_BODY_BYTES + 1))), { status: 413, code: 'body_too_large', details: undefined });
  const within = await post(sized(MAX_BODY_BYTES));
  assert.equal([within.status, await within.json()], [200, { active: false, reason: 'invalid' }]);
});

test.run();
