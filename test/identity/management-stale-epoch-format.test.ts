import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { runtimePerson, type RuntimePerson } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A management credential issued before the account's epoch was raised (a device removed, the others revoked) is
 * refused `401 account_epoch_stale`, an account-policy failure, which the spec's Errors section gives the flat Problem
 * body on every route, the nested-ApiError management routes included. The served description must declare that
 * Problem on those routes' 401, or a client that trusts it cannot read the refusal.
 */
let server: TestServer;
let doc: { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>> };
let mara: RuntimePerson;
let bearer: string;
let consoleHeaders: Record<string, string>;

withTestServer(test, (started) => ({ server } = started), productParts);
test.before(async () => {
  doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as typeof doc;
  mara = await runtimePerson(server, 'mara');
  const desktop = await mara.device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  assert.is(desktop.status, 201, await desktop.clone().text());
  bearer = ((await desktop.json()) as { accessToken: string }).accessToken;
  const opened = await mara.browser.fetch(`${server.url}/v1/auth/console-session`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
  assert.is(opened.status, 200, await opened.clone().text());
  const { csrfToken } = (await opened.json()) as { csrfToken: string };
  consoleHeaders = { 'x-csrf-token': csrfToken };
  const raised = await mara.device.request(server.url, 'POST', '/v1/account/devices/revoke-all');
  assert.is(raised.status, 200, await raised.clone().text());
});

async function assertStaleAsDeclared(res: Response, method: string, path: string): Promise<void> {
  const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
  const body = await jsonOf(res);
  const code = type === 'application/problem+json' ? body.code : (body.error as { code?: string } | undefined)?.code;
  assert.equal([res.status, code], [401, 'account_epoch_stale'], `${method.toUpperCase()} ${path}`);
  const declared = Object.keys(doc.paths[path]![method]!.responses['401']?.content ?? {});
  assert.ok(declared.includes(type), `${method.toUpperCase()} ${path} answered 401 as ${type}; the document declares ${declared.join(', ')}`);
}

test('a management bearer of an older epoch: 401 account_epoch_stale in the body the document declares', async () => {
  const auth = { authorization: `Bearer ${bearer}` };
  await assertStaleAsDeclared(await fetch(`${server.url}/v1/auth/management-sessions`, { headers: auth }), 'get', '/v1/auth/management-sessions');
  await assertStaleAsDeclared(await fetch(`${server.url}/v1/admin/reviewer-authorities`, { headers: auth }), 'get', '/v1/admin/reviewer-authorities');
  await assertStaleAsDeclared(
    await fetch(`${server.url}/v1/auth/management-sessions/grt_00000000000000000000000000`, { method: 'DELETE', headers: auth }),
    'delete',
    '/v1/auth/management-sessions/{sessionId}',
  );
});

test('a console session of an older epoch: likewise, on the CSRF-protected console routes too', async () => {
  const call = (path: string, init: RequestInit = {}) => mara.browser.fetch(`${server.url}${path}`, { ...init, headers: { ...consoleHeaders, ...(init.headers as Record<string, string>) } });
  await assertStaleAsDeclared(await call('/v1/auth/management-sessions'), 'get', '/v1/auth/management-sessions');
  await assertStaleAsDeclared(
    await call('/v1/admin/users/acc_00000000000000000000000000/platform-admin', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ reason: 'stale epoch check' }) }),
    'put',
    '/v1/admin/users/{userId}/platform-admin',
  );
});

test.run();
