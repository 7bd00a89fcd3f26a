import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClient } from '../../client/runtime-client.js';
import { MEDIA_CONTROL_PATH } from '../../media/control/media-control.socket.js';
import { productParts } from '../../server/main.js';
import { controlToken, controlUrl, upgrade, type Answer } from '../support/runtime-socket.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * RFC 6750 3 on the WebSockets a bearer opens (the runtime socket, the control channel, the Media control plane): a
 * 401 of the upgrade carries `WWW-Authenticate: Bearer realm="registry"`, with `error="invalid_token"` when a bearer was
 * offered (as the subprotocol `registry.bearer.<token>`) and refused, as the HTTP gateway's bearer operations do
 * (docs/decisions.md, "Bearer challenges"). The Runtime's HTTP refusals, which share their errors with the sockets,
 * answer the same.
 */
let server: TestServer;
let env: TestEnvironment;
let uma: RuntimePerson;

const NO_TOKEN = 'Bearer realm="registry"';
const INVALID_TOKEN = 'Bearer realm="registry", error="invalid_token"';

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  uma = await runtimePerson(server, 'uma-challenge');
  env = await testEnvironment(server.opsUrl, 'challenge-world', 'uma-challenge');
});

function assertChallenge(answer: Answer, code: string, challenge: string, what: string): void {
  assert.equal([answer.status, answer.code, answer.wwwAuthenticate], [401, code, challenge], what);
}

const mediaUrl = (): string => `${server.url.replace(/^http/, 'ws')}${MEDIA_CONTROL_PATH}`;

test('runtime socket: no bearer, and a refused one', async () => {
  const page = await (await uma.runtime(env)).open();
  assertChallenge(await upgrade(page.socketUrl(), ['registry.v1.json'], env.origin), 'runtime_token_invalid', NO_TOKEN, 'no bearer');
  const wrongKind = RuntimeClient.subprotocols(await controlToken(page));
  assertChallenge(await upgrade(page.socketUrl(), wrongKind, env.origin), 'runtime_token_invalid', INVALID_TOKEN, 'a control token');
});

test('control channel: no control token, and a refused one', async () => {
  const page = await (await uma.runtime(env)).open();
  assertChallenge(await upgrade(controlUrl(server.url), ['registry.v1.json'], env.origin), 'runtime_token_invalid', NO_TOKEN, 'no token');
  const wrongKind = RuntimeClient.subprotocols(page.accessToken);
  assertChallenge(await upgrade(controlUrl(server.url), wrongKind, env.origin), 'runtime_token_invalid', INVALID_TOKEN, 'a runtime access token');
});

test('Media control plane: no grant, and a refused one', async () => {
  assertChallenge(await upgrade(mediaUrl(), ['registry.v1.json'], env.origin), 'media_grant_invalid', NO_TOKEN, 'no grant');
  assertChallenge(await upgrade(mediaUrl(), ['registry.v1.json', 'registry.bearer.pgr_not-a-grant'], env.origin), 'media_grant_invalid', INVALID_TOKEN, 'not a grant');
});

test('the Runtime HTTP refusals the sockets share: the gateway challenge', async () => {
  const none = await fetch(`${server.url}/v1/runtime/session`, { method: 'POST', headers: { origin: env.origin } });
  assert.equal([none.status, none.headers.get('www-authenticate')], [401, NO_TOKEN]);
  const refused = await fetch(`${server.url}/v1/runtime/session`, { method: 'POST', headers: { origin: env.origin, authorization: 'Bearer not.a.token' } });
  assert.equal([refused.status, refused.headers.get('www-authenticate')], [401, INVALID_TOKEN]);
});

test.run();
