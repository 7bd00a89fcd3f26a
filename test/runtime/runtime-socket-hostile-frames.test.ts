import { decode, encode } from '@msgpack/msgpack';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { ManualClock } from '../../actors/clock.js';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { connect, controlToken, controlUrl, runtimeSocket } from '../support/runtime-socket.js';
import { cutAfterUpgrade } from '../support/uws-upgrade-cut.js';
import { waitFor } from '../support/wait.js';

/**
 * The Runtime plane's sockets against hostile and careless clients, through the real server: every refusal is the
 * documented one (the upgrade's status and code, or the AsyncAPI close code), a bad message leaves the socket open
 * only when the AsyncAPI says so, and sockets opened and closed by the dozen leave nobody behind in presence.
 * An audit found these correct but for msgpack text that was not UTF-8 (read as other text and echoed back).
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let other: TestEnvironment;
let ida: RuntimePerson;
let page: RuntimeClient;
const JSON_CODEC = 'registry.v1.json';
const MSGPACK_CODEC = 'registry.v1.msgpack';

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: '3600' }, clock);
test.before(async () => {
  ida = await runtimePerson(server, 'ida');
  ida.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'idas-world', 'ida');
  other = await testEnvironment(server.opsUrl, 'other-world', 'ida');
  page = await (await ida.runtime(env)).open();
});

interface Opened {
  readonly ws: WebSocket;
  readonly protocol: string;
  /** Decoded messages, in either codec. */
  readonly messages: Array<Record<string, unknown>>;
  /** Payload bytes of each message received. */
  readonly frameBytes: number[];
  readonly closed: Promise<{ code: number; reason: string }>;
}
type Upgrade = { opened: Opened } | { status: number; body: Record<string, unknown> };

/** Opens a socket of either codec, or returns the refused upgrade's status and Problem body. */
async function upgrade(url: string, protocols: string[], origin: string, headers: Record<string, string> = {}): Promise<Upgrade> {
  for (let attempt = 1; ; attempt++) {
    const result = await new Promise<Upgrade>((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { origin, headers });
      const messages: Array<Record<string, unknown>> = [];
      const frameBytes: number[] = [];
      const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
      ws.on('message', (data, isBinary) => {
        frameBytes.push((data as Buffer).byteLength);
        messages.push((isBinary ? decode(data as Buffer) : JSON.parse(data.toString())) as Record<string, unknown>);
      });
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(body || '{}') as Record<string, unknown> }));
      });
      ws.on('error', reject);
      ws.on('open', () => resolve({ opened: { ws, protocol: ws.protocol, messages, frameBytes, closed } }));
    });
    if (!('opened' in result) || attempt === 3 || !(await cutAfterUpgrade(result.opened.ws, result.opened.closed.then((c) => c.code)))) return result;
  }
}

async function open(protocols: string[], url = page.socketUrl(), origin = page.origin): Promise<Opened> {
  const result = await upgrade(url, protocols, origin);
  if (!('opened' in result)) throw new Error(`refused ${result.status} ${JSON.stringify(result.body)}`);
  return result.opened;
}

async function refused(url: string, protocols: string[], origin: string, headers: Record<string, string> = {}): Promise<{ status: number; code: unknown }> {
  const result = await upgrade(url, protocols, origin, headers);
  if ('opened' in result) {
    result.opened.ws.close();
    throw new Error('the upgrade was accepted');
  }
  return { status: result.status, code: result.body.code };
}

const bearer = (token: string): string => `registry.bearer.${token}`;

/** Sends frames on a fresh runtime socket of `codec`; the close, or the messages after `ready` once the answer came. */
async function outcome(codec: string, frames: Array<string | Buffer>): Promise<{ close?: number; answers: Array<Record<string, unknown>>; frameBytes: number[] }> {
  const socket = await open([codec, bearer(page.accessToken)]);
  await waitFor(() => socket.messages.find((m) => m.type === 'ready'), 'ready');
  let close: number | undefined;
  void socket.closed.then((c) => (close = c.code));
  for (const frame of frames) socket.ws.send(frame);
  await waitFor(() => (close !== undefined || socket.messages.length > frames.length ? true : undefined), 'the answers or a close');
  const result = { ...(close === undefined ? {} : { close }), answers: socket.messages.slice(1), frameBytes: socket.frameBytes.slice(1) };
  socket.ws.close();
  await socket.closed;
  return result;
}

const codeOf = (answers: Array<Record<string, unknown>>): unknown[] => answers.map((m) => (m.type === 'error' ? m.code : m.type));

test('subprotocols: the first supported one offered wins; unknown or differently cased ones and a bearer alone are 400', async () => {
  assert.is((await open([JSON_CODEC, MSGPACK_CODEC, bearer(page.accessToken)])).protocol, JSON_CODEC);
  const msgpack = await open([MSGPACK_CODEC, JSON_CODEC, bearer(page.accessToken)]);
  assert.is(msgpack.protocol, MSGPACK_CODEC);
  await waitFor(() => msgpack.messages.find((m) => m.type === 'ready'), 'ready in msgpack');
  msgpack.ws.close();
  assert.equal(await refused(page.socketUrl(), ['REGISTRY.V1.JSON', bearer(page.accessToken)], page.origin), { status: 400, code: 'unsupported_subprotocol' });
  assert.equal(await refused(page.socketUrl(), [bearer(page.accessToken)], page.origin), { status: 400, code: 'unsupported_subprotocol' });
  const plain = await open([], page.socketUrl(), page.origin).catch(() => undefined);
  assert.is(plain, undefined, 'no bearer at all is refused');
});

test('credentials: the bearer in the query string, another origin, another Environment or the wrong token type are refused', async () => {
  assert.equal(await refused(`${page.socketUrl()}&access_token=${page.accessToken}`, [JSON_CODEC], page.origin), { status: 401, code: 'runtime_token_invalid' });
  assert.equal(await refused(page.socketUrl(), [JSON_CODEC, bearer(page.accessToken)], other.origin), { status: 403, code: 'runtime_origin_mismatch' });
  const otherToken = await ida.token(other);
  assert.equal(await refused(page.socketUrl(), [JSON_CODEC, bearer(otherToken)], other.origin), { status: 404, code: 'runtime_session_not_found' });
  const control = await controlToken(page);
  assert.equal(await refused(page.socketUrl(), [JSON_CODEC, bearer(control)], page.origin), { status: 401, code: 'runtime_token_invalid' });
  assert.equal(await refused(controlUrl(server.url), [JSON_CODEC, bearer(page.accessToken)], page.origin), { status: 401, code: 'runtime_token_invalid' });
  assert.equal(await refused(controlUrl(server.url), [JSON_CODEC, bearer(control)], other.origin), { status: 403, code: 'runtime_origin_mismatch' });
  // Outside browsers the bearer may come as a header: then nothing is echoed and the codec is JSON.
  const tool = await upgrade(page.socketUrl(), [], page.origin, { authorization: `Bearer ${page.accessToken}` });
  assert.ok('opened' in tool && tool.opened.protocol === '');
  if ('opened' in tool) tool.opened.ws.close();
});

test('frames of the other codec close 1003; bytes that are not one value of the codec close 1007', async () => {
  assert.is((await outcome(MSGPACK_CODEC, ['{"type":"ping"}'])).close, 1003);
  assert.is((await outcome(JSON_CODEC, [Buffer.from('{"type":"ping"}')])).close, 1003);
  assert.is((await outcome(MSGPACK_CODEC, [Buffer.concat([Buffer.from(encode({ type: 'ping' })), Buffer.from([0xc0])])])).close, 1007);
  assert.is((await outcome(MSGPACK_CODEC, [Buffer.from([0x81, 0x90, 0xc0])])).close, 1007, 'a map keyed by an array');
  assert.is((await outcome(JSON_CODEC, ['{"type":"ping"}{"type":"ping"}'])).close, 1007);
  const notUtf8 = Buffer.from([0x82, 0xa4, ...Buffer.from('type'), 0xa4, ...Buffer.from('ping'), 0xa3, ...Buffer.from('ref'), 0xa2, 0xff, 0xfe]);
  assert.equal(await outcome(MSGPACK_CODEC, [notUtf8]), { close: 1007, answers: [], frameBytes: [] }, 'a msgpack str that is not UTF-8 (once echoed as other text)');
});

test('values no message takes are validation_failed and the socket stays open', async () => {
  const msgpackFrames = [
    encode({ type: 'ping', ref: new Date() }),
    encode({ type: 'ping', ref: 2n ** 63n - 1n }, { useBigInt64: true }),
    Buffer.from([0x82, 0xa4, ...Buffer.from('type'), 0xa4, ...Buffer.from('ping'), 0x01, 0xa1, 0x61]),
    encode(42),
    encode([{ type: 'ping' }]),
    Buffer.concat([Buffer.alloc(16_383, 0x91), Buffer.from([0xc0])]), // 16,383 arrays deep, in 16 KiB
  ].map((bytes) => Buffer.from(bytes));
  const msgpack = await outcome(MSGPACK_CODEC, [...msgpackFrames, Buffer.from(encode({ type: 'ping', ref: 'last' }))]);
  assert.is(msgpack.close, undefined);
  assert.equal(codeOf(msgpack.answers), [...msgpackFrames.map(() => 'validation_failed'), 'pong']);
  const deep = `{"type":"ping","ref":${'['.repeat(8_000)}${']'.repeat(8_000)}}`;
  // 1,500 members no message takes, in 14 KB: the error listing them still fits the 16 KiB the server promises.
  const crowded = `{"type":"ping",${Array.from({ length: 1_500 }, (_, i) => `"k${i}":0`).join(',')}}`;
  const json = await outcome(JSON_CODEC, ['{"type":"ping","__proto__":{"x":1}}', '{"type":"presence.list","after":1e400}', deep, crowded, '{"type":"ping","ref":"a","ref":"b"}']);
  assert.is(json.close, undefined);
  assert.equal(codeOf(json.answers), ['validation_failed', 'validation_failed', 'validation_failed', 'validation_failed', 'pong']);
  assert.is(json.answers[4]!.ref, 'b', 'the last of duplicate members counts, as JSON.parse reads it');
  assert.is(json.frameBytes.every((bytes) => bytes <= 16_384), true, `answers of ${json.frameBytes.join(', ')} bytes`);
});

test('16384 bytes is a message, one more closes 1009, however fragmented; the control channel closes 1008 or 1009', async () => {
  const sized = (bytes: number): string => {
    const frame = `{"type":"ping","pad":"${'x'.repeat(bytes - 24)}"}`;
    assert.is(Buffer.byteLength(frame), bytes);
    return frame;
  };
  assert.equal(codeOf((await outcome(JSON_CODEC, [sized(16_384)])).answers), ['validation_failed']);
  assert.is((await outcome(JSON_CODEC, [sized(16_385)])).close, 1009);
  const socket = await open([JSON_CODEC, bearer(page.accessToken)]);
  await waitFor(() => socket.messages.find((m) => m.type === 'ready'), 'ready');
  socket.ws.send('{"type":"ping",', { fin: false });
  socket.ws.ping();
  socket.ws.send('"ref":"joined"}', { fin: true });
  assert.is((await waitFor(() => socket.messages.find((m) => m.type === 'pong'), 'the pong')).ref, 'joined');
  for (let i = 0; i < 3; i++) socket.ws.send('x'.repeat(6_000), { fin: false });
  socket.ws.send('', { fin: true });
  assert.is((await socket.closed).code, 1009);

  const token = await controlToken(page);
  const written = await open([JSON_CODEC, bearer(token)], controlUrl(server.url));
  written.ws.send('{}');
  assert.is((await written.closed).code, 1008);
  const oversized = await open([MSGPACK_CODEC, bearer(token)], controlUrl(server.url));
  oversized.ws.send(Buffer.alloc(1_025));
  assert.is((await oversized.closed).code, 1009);
});

test('fifty runtime sockets and control channels opened and closed leave one member present, and the next socket served', async () => {
  const token = await controlToken(page);
  for (let i = 0; i < 50; i++) {
    // Upgrades of a session are budgeted (RUNTIME_SOCKET_UPGRADES_PER_MINUTE): half a minute refills ten of each.
    if (i % 10 === 0) clock.advance(30_000);
    const socket = await runtimeSocket(page);
    await socket.next('ready');
    const control = await connect(controlUrl(server.url), RuntimeClient.subprotocols(token), page.origin);
    await control.next('session.activity');
    socket.ws.close();
    control.ws.close();
    await Promise.all([socket.closed, control.closed]);
  }
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  socket.send({ type: 'presence.list' });
  const snapshot = await socket.next('presence.snapshot');
  assert.is(snapshot.total, 1);
  socket.ws.close();
});

test.run();
