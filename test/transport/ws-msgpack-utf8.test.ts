import { randomUUID } from 'node:crypto';
import { decode, encode } from '@msgpack/msgpack';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { CloseCode, defineWebSocketEndpoint, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { cutAfterUpgrade } from '../support/uws-upgrade-cut.js';

/**
 * A msgpack str holds UTF-8. The decoder does not check: it read other bytes as Latin-1 (short strings) or U+FFFD
 * (long ones), so a client's `ref` came back as different text, where a JSON text frame that is not UTF-8 is refused.
 * Bytes that are not the codec's are closed 1007 on either codec.
 */
let app: TemplatedApp;
let port = 0;
let mounted: MountedWebSocketEndpoint;

test.before(async () => {
  app = uws.App();
  const endpoint = defineWebSocketEndpoint<{ name: string }, { type: 'echo'; text: string }, { type: 'echo'; text: string }>({
    path: '/echo',
    name: 'echo',
    maxMessageBytes: 4096,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: 32,
    inbound: z.strictObject({ type: z.literal('echo'), text: z.string() }),
    authenticate: async () => ({ name: 'carol' }),
    onMessage: (conn, message) => void conn.send(message),
  });
  mounted = mountWebSocketEndpoint(app, endpoint, { logger: pino({ level: 'silent' }), newRequestId: () => `req_${randomUUID()}` });
  port = await listenOnLoopback(app);
});

test.after(() => {
  mounted.shutdown();
  closeApp(app);
});

/** Sends one binary frame on a msgpack socket; what came back: the echoed text, or the close. */
async function exchange(frame: Buffer): Promise<{ text?: string; close?: number }> {
  for (let attempt = 1; ; attempt++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, ['registry.v1.msgpack']);
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    await new Promise((resolve, reject) => ws.on('open', resolve).on('error', reject));
    if (attempt < 3 && (await cutAfterUpgrade(ws, closed))) continue;
    const answer = new Promise<{ text: string }>((resolve) => ws.on('message', (data) => resolve(decode(data as Buffer) as { text: string })));
    ws.send(frame);
    const outcome = await Promise.race([answer.then(({ text }) => ({ text })), closed.then((close) => ({ close }))]);
    ws.close();
    return outcome;
  }
}

const str = (payload: Buffer): Buffer =>
  payload.length < 32 ? Buffer.concat([Buffer.from([0xa0 | payload.length]), payload]) : Buffer.concat([Buffer.from([0xd9, payload.length]), payload]);
/** `{ type: 'echo', text: <str of these bytes> }`, the text's bytes as given. */
const echoOf = (text: Buffer): Buffer => Buffer.concat([Buffer.from([0x82]), str(Buffer.from('type')), str(Buffer.from('echo')), str(Buffer.from('text')), str(text)]);

test('UTF-8 text in a str reaches the handler as sent', async () => {
  const text = 'héllo ✓ 𝄞'.repeat(3);
  assert.equal(await exchange(Buffer.from(encode({ type: 'echo', text }))), { text });
  assert.equal(await exchange(echoOf(Buffer.from(text))), { text });
});

test('a str that is not UTF-8 closes 1007, short or long, as a value or a member name', async () => {
  const cases: Array<[string, Buffer]> = [
    ['short str', echoOf(Buffer.from([0x61, 0xff, 0xfe]))],
    ['long str', echoOf(Buffer.concat([Buffer.alloc(220, 0x61), Buffer.from([0xc3])]))],
    ['encoded surrogate', echoOf(Buffer.from([0xed, 0xa0, 0x80]))],
    ['overlong encoding', echoOf(Buffer.from([0xc0, 0xaf]))],
    ['member name', Buffer.concat([Buffer.from([0x82]), str(Buffer.from('type')), str(Buffer.from('echo')), str(Buffer.from([0x74, 0xff])), str(Buffer.from('x'))])],
  ];
  for (const [what, frame] of cases) assert.equal(await exchange(frame), { close: CloseCode.undecodable }, what);
});

test.run();
