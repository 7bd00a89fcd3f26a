import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { CloseCode, defineWebSocketEndpoint, KeyedBudgets, mountWebSocketEndpoint, type MountedWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { listenOnLoopback } from '../support/http.js';
import { cutAfterUpgrade } from '../support/uws-upgrade-cut.js';

/**
 * Budgets kept per someone (a person) rather than per connection: every connection of a key draws from its one bucket
 * (KeyedBudgets, bounded). Last, an endpoint that supplies them (`messageBudget`), on a real uWS server on
 * loopback with the `ws` package as the client.
 */

test('every budget handed out for a key is one bucket: a reconnect continues it, another key has its own', () => {
  const budgets = new KeyedBudgets(10);
  const first = budgets.budgetOf('env-1 actor-a', 0);
  for (let i = 0; i < 10; i++) assert.ok(first.take(0), `message ${i + 1} of the burst`);
  assert.not.ok(first.take(0), 'the burst is spent');
  // The same person reconnects: a new connection, the same budget.
  const again = budgets.budgetOf('env-1 actor-a', 0);
  assert.not.ok(again.take(0), 'a reconnect does not start a fresh budget');
  assert.ok(budgets.budgetOf('env-1 actor-b', 0).take(0), 'another person is not charged for it');
  // 10 a minute: one message back every 6 s.
  assert.ok(again.take(6_001));
  assert.not.ok(again.take(6_001));
});

test('memory: the buckets kept are bounded, the key handed out least recently going first (it comes back full)', () => {
  const budgets = new KeyedBudgets(10, { maxKeys: 3 });
  const spent = budgets.budgetOf('a', 0);
  for (let i = 0; i < 10; i++) spent.take(0);
  // Three other keys: 'a' is the one handed out least recently, so its bucket goes to make room.
  for (const key of ['b', 'c', 'd']) budgets.budgetOf(key, 0).take(0);
  const fresh = budgets.budgetOf('a', 0);
  assert.ok(fresh !== spent && fresh.take(0), "'a' was forgotten, so it starts afresh");
  // A connection that held the forgotten bucket keeps it, spent as it was.
  assert.not.ok(spent.take(0));
  // 'a' was handed out just now, so 'e' pushes out 'c' ('b' went for 'a'), and 'a' keeps its bucket.
  budgets.budgetOf('e', 0);
  assert.ok(budgets.budgetOf('a', 0) === fresh, "'a' kept its bucket while 'e' came in");
  assert.ok(budgets.budgetOf('c', 0).take(0) && budgets.budgetOf('d', 0) !== undefined, "'c' was forgotten and starts afresh");
});

test('an endpoint that supplies the budget (one per user): a reconnect continues it instead of starting afresh', async () => {
  const perUser = new KeyedBudgets(5);
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
    messageBudget: (user: { name: string }) => perUser.budgetOf(user.name),
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
