import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestServer } from '../support/server.js';

/**
 * What clients get wrong on purpose or by accident, through the real server: requests that once reached Postgres or
 * stayed in flight for ever. Found by throwing malformed input at every operation.
 */
const OPS_TOKEN = 'operator-token-0123456789';
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, { OPS_TOKEN });
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

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

  const ready = await fetch(`${server.url}/ready`);
  assert.is(ready.status, 200);
});

test.run();
