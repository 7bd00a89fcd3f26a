import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { ManualClock, systemClock } from '../../actors/clock.js';
import { RateLimiter } from '../../transport/http/rate-limit.js';
import { CloseCode, defineWebSocketEndpoint, keyedBudget, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { cutAfterUpgrade } from '../support/uws-upgrade-cut.js';

/**
 * Budgets kept per someone (a person) rather than per connection: every connection of a key draws from one bucket of
 * the bounded, keyed RateLimiter. Last, an endpoint that supplies them (`messageBudget`), on a real uWS server on
 * loopback with the `ws` package as the client.
 */

test('every budget handed out for a key draws from one bucket: a reconnect continues it, another key has its own', () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter(clock);
  const first = keyedBudget(limiter, 'env-1 actor-a', 10);
  for (let i = 0; i < 10; i++) assert.ok(first.take(0), `message ${i + 1} of the burst`);
  assert.not.ok(first.take(0), 'the burst is spent');
  // The same person reconnects: a new connection, the same budget.
  const again = keyedBudget(limiter, 'env-1 actor-a', 10);
  assert.not.ok(again.take(0), 'a reconnect does not start a fresh budget');
  assert.ok(keyedBudget(limiter, 'env-1 actor-b', 10).take(0), 'another person is not charged for it');
  // 10 a minute: one message back every 6 s.
  clock.advance(6_001);
  assert.ok(again.take(0));
  assert.not.ok(again.take(0));
});

test('memory: the buckets held are bounded, the longest idle going first (it comes back full, erring towards allowing)', () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter(clock, 3);
  const spent = keyedBudget(limiter, 'a', 10);
  for (let i = 0; i < 10; i++) spent.take(0);
  assert.not.ok(spent.take(0));
  // Three other keys: 'a' is the longest idle, so its bucket goes to make room.
  for (const key of ['b', 'c', 'd']) keyedBudget(limiter, key, 10).take(0);
  assert.ok(spent.take(0), "'a' was forgotten, so it starts afresh");
  // The key in use is never the one pushed out: 'a' was just used, 'b' is the longest idle now.
  keyedBudget(limiter, 'e', 10).take(0);
  for (let i = 0; i < 9; i++) assert.ok(spent.take(0), `message ${i + 2} of 'a's fresh burst`);
  assert.not.ok(spent.take(0), "'a' kept its bucket while 'e' came in");
});

test('an endpoint that supplies the budget (one per user): a reconnect continues it instead of starting afresh', async () => {
  const perUser = new RateLimiter(systemClock);
  const definition = {
    path: '/echo',
    name: 'user-limited',
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: 8,
    messagesPerMinute: 5,
    inbound: z.object({ type: z.literal('echo'), text: z.string() }),
    async authenticate() {
      await new Promise((resolve) => setTimeout(resolve, 5)); // an asynchronous upgrade, as every real endpoint's
      return { name: 'alice' };
    },
    messageBudget: (user: { name: string }) => keyedBudget(perUser, user.name, 5),
    onMessage: (conn: { send(m: unknown): boolean }, message: { type: 'echo'; text: string }) => void conn.send(message),
  };
  assert.throws(() => defineWebSocketEndpoint({ ...definition, messagesPerMinute: undefined }), /messageBudget needs messagesPerMinute/);
  const app: TemplatedApp = uws.App();
  const mounted: MountedWebSocketEndpoint = mountWebSocketEndpoint(app, defineWebSocketEndpoint(definition), {
    logger: pino({ level: 'silent' }),
    newRequestId: () => `req_${randomUUID()}`,
  });
  const port = await listenOnLoopback(app);
  const open = async (): Promise<{ ws: WebSocket; heard: string[]; closed: Promise<number> }> => {
    for (let attempt = 1; ; attempt++) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, ['registry.v1.json']);
      const heard: string[] = [];
      ws.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8')) as { type: string; text?: string; code?: string };
        heard.push(m.type === 'error' ? String(m.code) : String(m.text));
      });
      const closed = new Promise<number>((resolve) => ws.once('close', resolve));
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      if (attempt === 3 || !(await cutAfterUpgrade(ws, closed))) return { ws, heard, closed };
    }
  };
  try {
    const first = await open();
    for (let i = 0; i < 3; i += 1) first.ws.send(JSON.stringify({ type: 'echo', text: `a${i}` }));
    while (first.heard.length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    first.ws.close();
    await first.closed;
    const second = await open();
    for (let i = 0; i < 3; i += 1) second.ws.send(JSON.stringify({ type: 'echo', text: `b${i}` }));
    const stillOpen = new Promise<string>((resolve) => setTimeout(() => resolve('still open after 5 s'), 5_000).unref());
    assert.is(await Promise.race([second.closed, stillOpen]), CloseCode.rateLimited, `the second connection heard ${second.heard.join(' ')}`);
    assert.equal(second.heard, ['b0', 'b1', 'rate_limited'], 'the same user had 5 messages a minute in all, over both connections');
  } finally {
    mounted.shutdown();
    closeApp(app);
  }
});

test.run();
