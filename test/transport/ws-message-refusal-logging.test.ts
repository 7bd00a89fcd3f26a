import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { HttpError } from '../../transport/http/errors.js';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { defineWebSocketEndpoint, mountWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';

/**
 * How refused WebSocket messages are logged, as the gateway logs HTTP refusals: a message refused for the client's
 * doing (it does not validate, its handler refuses it with a 4xx) is debug, since a socket may send hundreds a second
 * and an info line each let any client fill the logs; a handler's 5xx (an outage) is warn with its cause.
 */
type Logged = { level: number; msg: string; code?: string; err?: { message: string } };

test('a refused message is logged at debug when it is the client’s doing, at warn with its cause when it is the server’s', async () => {
  const logs: Logged[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Logged) });
  const app: TemplatedApp = uws.App();
  const Inbound = z.strictObject({ type: z.literal('ask'), what: z.enum(['mine', 'forbidden', 'outage']) });
  const endpoint = defineWebSocketEndpoint<{ id: string }, z.infer<typeof Inbound>, { type: string }>({
    path: '/asking',
    name: 'asking',
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: 8,
    inbound: Inbound,
    async authenticate() {
      return { id: 'someone' };
    },
    onMessage(conn, message) {
      if (message.what === 'forbidden') throw new HttpError(403, 'not_yours', 'that is not yours');
      if (message.what === 'outage') throw new HttpError(503, 'storage_unavailable', 'storage is down');
      conn.send({ type: 'answer' });
    },
  });
  mountWebSocketEndpoint(app, endpoint, { logger, newRequestId: () => `req_${randomUUID()}` });
  const port = await listenOnLoopback(app);
  const ws = new WebSocket(`ws://127.0.0.1:${port}/asking`, ['registry.v1.json']);
  try {
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
    const replies: Array<{ type: string; code?: string }> = [];
    ws.on('message', (data: Buffer) => replies.push(JSON.parse(data.toString()) as { type: string; code?: string }));
    const sent = ['{"type":"ask","what":"nothing"}', '{"type":"ask","what":"mine","extra":1}', '{"type":"ask","what":"forbidden"}', '{"type":"ask","what":"outage"}', '{"type":"ask","what":"mine"}'];
    for (const message of sent) ws.send(message);
    const deadline = Date.now() + 5_000;
    while (replies.length < sent.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(replies.map((r) => r.code ?? r.type), ['validation_failed', 'validation_failed', 'not_yours', 'storage_unavailable', 'answer']);
    const refusals = logs.filter((l) => l.msg === 'message refused' || l.msg === 'message handler refused the message');
    assert.equal(refusals.map((l) => [l.code, l.level]), [['validation_failed', 20], ['validation_failed', 20], ['not_yours', 20], ['storage_unavailable', 40]]);
    assert.is(refusals[3]!.err?.message, 'storage is down');
  } finally {
    ws.terminate();
    closeApp(app);
  }
});

test.run();
