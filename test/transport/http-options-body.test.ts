import { connect } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';

/**
 * OPTIONS is no operation of the table: the gateway answers it itself (a CORS preflight, or a plain OPTIONS listing the
 * methods). A body sent with it is, like one sent to a 404 or a 405, not read: uWS would read it to its end, however
 * long, before the connection could serve anything else. Browsers never send one.
 */
const Item = apiSchema('TestOptionsBodyItem', z.strictObject({ name: z.string() }));
const ALLOWED = 'https://page.example';
const routes = [
  defineRoute({
    operationId: 'optionsBodyItem',
    method: 'post',
    path: '/v1/test/options-body',
    summary: 'Item',
    tags: ['Test'],
    credential: 'none',
    cors: true,
    errorFormat: 'api',
    body: Item,
    responses: { 200: { description: 'Item.', schema: Item } },
    handler: async ({ body }) => ({ status: 200, body }),
  }),
];

let db: TestDatabase;
let gateway: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  const idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateway = await startGateway({ routes, idempotency, corsOrigins: async (origin) => origin === ALLOWED });
});
test.after(async () => {
  gateway.close();
  await db.drop();
});

/** Writes `request`, then (`pump`) keeps sending body bytes; resolves once the server closes the connection, or after `ms`. */
function exchange(request: string, ms: number, pump = true): Promise<{ readonly text: string; readonly closed: boolean; readonly sent: number }> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(gateway.url).port), '127.0.0.1');
    let text = '';
    let sent = 0;
    const filler = Buffer.alloc(16 * 1024, 'x');
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => undefined);
    const pumping = setInterval(() => {
      if (pump && socket.writable && socket.writableLength < 1_000_000) {
        socket.write(filler);
        sent += filler.length;
      }
    }, 5);
    const finish = (closed: boolean): void => {
      clearInterval(pumping);
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, sent });
    };
    const timer = setTimeout(() => finish(false), ms);
    socket.on('close', () => finish(true));
    socket.write(request);
  });
}

const options = (headers: string) =>
  `OPTIONS /v1/test/options-body HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}Content-Length: 500000000\r\n\r\n`;

test('an OPTIONS with a body, preflight or plain, is refused and the connection closed instead of reading the body', async () => {
  for (const [name, headers] of [
    ['plain', ''],
    ['preflight of an allowed origin', `Origin: ${ALLOWED}\r\nAccess-Control-Request-Method: POST\r\n`],
    ['preflight of a stranger', 'Origin: https://stranger.example\r\nAccess-Control-Request-Method: POST\r\n'],
  ] as const) {
    const { text, closed, sent } = await exchange(options(headers), 3_000);
    assert.ok(closed, `${name}: the connection stayed open, the server reading ${sent} bytes of body`);
    assert.match(text, /^HTTP\/1\.1 400 /, name);
    assert.match(text.toLowerCase(), /\r\nconnection: close\r\n/, name);
    assert.match(text.toLowerCase(), /\r\nx-request-id: req_/, name);
    assert.match(text, /"code":"body_not_allowed"/, name);
  }
});

test('an OPTIONS without a body is answered as before, and the connection kept', async () => {
  const plain = await exchange('OPTIONS /v1/test/options-body HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 1_000, false);
  assert.match(plain.text, /^HTTP\/1\.1 204 /);
  assert.is(plain.closed, false);
  const preflight = await exchange(
    `OPTIONS /v1/test/options-body HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: ${ALLOWED}\r\nAccess-Control-Request-Method: POST\r\n\r\n`,
    1_000,
    false,
  );
  assert.match(preflight.text, /^HTTP\/1\.1 204 /);
  assert.match(preflight.text.toLowerCase(), /\r\naccess-control-allow-origin: https:\/\/page\.example\r\n/);
  assert.is(preflight.closed, false);
});

test.run();
