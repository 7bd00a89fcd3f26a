import { DiagnosticSeverity, Parser } from '@asyncapi/parser';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RuntimeClientMessage, RuntimeCloseCode, RuntimeServerMessage } from '../../runtime/runtime-socket.messages.js';
import { RUNTIME_SOCKET_IDLE_TIMEOUT_S } from '../../runtime/runtime-sockets.js';
import { CloseCode } from '../../transport/ws/endpoint.js';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The AsyncAPI document of the runtime sockets, as served, passes what `asyncapi validate` checks: the CLI's validate
 * command is this parser's `validate`, failing on any diagnostic of error severity (warnings are held to zero too).
 */
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), productParts);

test('GET /v1/runtime/asyncapi.json is a valid AsyncAPI 3.0.0 document', async () => {
  const res = await fetch(`${server.url}/v1/runtime/asyncapi.json`);
  assert.is(res.status, 200);
  assert.is(res.headers.get('content-type'), 'application/vnd.aai.asyncapi+json');
  const text = await res.text();
  const document = JSON.parse(text) as { asyncapi: string; channels: Record<string, { address: string }> };
  assert.is(document.asyncapi, '3.0.0');
  assert.equal(Object.values(document.channels).map((c) => c.address).sort(), ['/v1/runtime/control', '/v1/runtime/socket']);
  const diagnostics = await new Parser().validate(text, { source: 'asyncapi.json' });
  const serious = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error || d.severity === DiagnosticSeverity.Warning);
  assert.equal(serious.map((d) => `${String(d.code)} /${d.path.join('/')}: ${d.message}`), []);
});

test('every message the server validates or sends is in the document', async () => {
  const document = (await (await fetch(`${server.url}/v1/runtime/asyncapi.json`)).json()) as { components: { messages: Record<string, { name: string }> } };
  const names = new Set(Object.values(document.components.messages).map((m) => m.name));
  for (const option of [...RuntimeClientMessage.options, ...RuntimeServerMessage.options]) {
    assert.ok(names.has(option.shape.type.value), option.shape.type.value);
  }
});

test('the document names every close code the sockets send, and the heartbeat that cuts a silent client (1006)', async () => {
  const document = (await (await fetch(`${server.url}/v1/runtime/asyncapi.json`)).json()) as { info: { description: string } };
  const text = document.info.description;
  for (const code of [...Object.values(CloseCode), ...Object.values(RuntimeCloseCode)]) assert.match(text, new RegExp(`\\b${code}\\b`), String(code));
  assert.match(text, `Heartbeat: the server pings a connection that has been silent for most of ${RUNTIME_SOCKET_IDLE_TIMEOUT_S} s`);
  assert.match(text, /cut without a close frame \(the client sees 1006\)\. Browsers/);
});

test('a broken document fails the same check (the check is not vacuous)', async () => {
  const text = await (await fetch(`${server.url}/v1/runtime/asyncapi.json`)).text();
  const broken = JSON.parse(text) as { operations: Record<string, { channel: { $ref: string } }> };
  Object.values(broken.operations)[0]!.channel.$ref = '#/channels/nowhere';
  const diagnostics = await new Parser().validate(JSON.stringify(broken));
  assert.ok(diagnostics.some((d) => d.severity === DiagnosticSeverity.Error));
});

test.run();
