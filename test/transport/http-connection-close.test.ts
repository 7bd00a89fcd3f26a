import { connect, type Socket } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';

/**
 * Answers that say `Connection: close` (a body over the limit, a draining node) must close the connection
 * (RFC 9112 9.6: a server that sends `close` MUST initiate closure after that response). Otherwise a client refused
 * for its upload goes on uploading into the connection, as much as it likes (a chunked body has no end), and the
 * server goes on receiving and parsing it.
 */
const LIMIT = 1024;
const Echo = apiSchema('TestCloseEcho', z.strictObject({ text: z.string() }));
const routes = [
  defineRoute({
    operationId: 'closeEcho',
    method: 'post',
    path: '/v1/test/close-echo',
    summary: 'Echo',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    body: Echo,
    maxBodyBytes: LIMIT,
    responses: { 200: { description: 'Echoed.', schema: Echo } },
    handler: async ({ body }) => ({ status: 200, body }),
  }),
  defineRoute({
    operationId: 'closeStatus',
    method: 'get',
    path: '/v1/test/close-status',
    summary: 'Status',
    tags: ['Test'],
    credential: 'none',
    errorFormat: 'api',
    responses: { 200: { description: 'Up.', schema: Echo } },
    handler: async () => ({ status: 200, body: { text: 'up' } }),
  }),
];

let db: TestDatabase;
let idempotency: PostgresIdempotencyStore;
let gateway: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateway = await startGateway({ routes, idempotency });
});
test.after(async () => {
  gateway.close();
  await db.drop();
});

interface Conversation {
  readonly socket: Socket;
  /** Everything received so far. */
  text(): string;
  /** Resolves when the server closed the connection, or with false after `ms`. */
  closedWithin(ms: number): Promise<boolean>;
}

async function open(url: string): Promise<Conversation> {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let received = '';
  let ended = false;
  const ends: Array<() => void> = [];
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  const onEnd = (): void => {
    ended = true;
    for (const wake of ends.splice(0)) wake();
  };
  socket.on('end', onEnd);
  socket.on('close', onEnd);
  socket.on('error', () => undefined);
  return {
    socket,
    text: () => received,
    closedWithin: (ms) =>
      ended
        ? Promise.resolve(true)
        : new Promise((resolve) => {
            const timer = setTimeout(() => resolve(false), ms);
            ends.push(() => {
              clearTimeout(timer);
              resolve(true);
            });
          }),
  };
}

const until = async (probe: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 5_000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

test('413 for a declared Content-Length over the limit closes the connection, as its Connection: close says', async () => {
  const conn = await open(gateway.url);
  conn.socket.write(`POST /v1/test/close-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`);
  conn.socket.write('{"text":"');
  await until(() => /\r\n\r\n\{.*\}$/s.test(conn.text()), 'the 413');
  assert.match(conn.text(), /^HTTP\/1\.1 413 /);
  assert.match(conn.text(), /\r\nconnection: close\r\n/i);
  assert.match(conn.text(), /"code":"body_too_large"/);
  // The client keeps uploading, as a client that does not read its answers would.
  for (let i = 0; i < 5 && !conn.socket.destroyed; i++) conn.socket.write('x'.repeat(16 * 1024));
  assert.ok(await conn.closedWithin(2_000), 'the server closed the connection after the 413 that said it would');
  conn.socket.destroy();
});

test('413 for a chunked body passing the limit while it streams closes the connection', async () => {
  const conn = await open(gateway.url);
  conn.socket.write('POST /v1/test/close-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
  const chunk = 'y'.repeat(800);
  for (let i = 0; i < 3; i++) conn.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
  await until(() => /\r\n\r\n\{.*\}$/s.test(conn.text()), 'the 413');
  assert.match(conn.text(), /^HTTP\/1\.1 413 /);
  // A chunked upload has no end the server knows of: only closing stops it.
  for (let i = 0; i < 5 && !conn.socket.destroyed; i++) conn.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
  assert.ok(await conn.closedWithin(2_000), 'the server closed the connection after the 413');
  conn.socket.destroy();
});

test('a draining node answers 503 with Connection: close and closes the kept-alive connection', async () => {
  const draining = await startGateway({ routes, idempotency });
  try {
    const conn = await open(draining.url);
    conn.socket.write('GET /v1/test/close-status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await until(() => conn.text().includes('"up"'), 'the first answer');
    draining.gateway.startDraining();
    const before = conn.text().length;
    conn.socket.write('GET /v1/test/close-status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await until(() => /\}$/.test(conn.text().slice(before)) && conn.text().length > before, 'the 503');
    const answer = conn.text().slice(before);
    assert.match(answer, /^HTTP\/1\.1 503 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
    assert.ok(await conn.closedWithin(2_000), 'the server closed the connection after the 503 that said it would');
    conn.socket.destroy();
  } finally {
    draining.close();
  }
});

test('a closing answer still carries one Connection header, and a HEAD answer no body', async () => {
  const draining = await startGateway({ routes, idempotency });
  try {
    draining.gateway.startDraining();
    const conn = await open(draining.url);
    conn.socket.write('POST /v1/test/close-echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"text":"a"}');
    assert.ok(await conn.closedWithin(2_000), 'closed after the 503');
    const head = conn.text().split('\r\n\r\n')[0]!;
    assert.is(head.match(/^connection:/gim)?.length, 1, head);
    const body = JSON.parse(conn.text().slice(head.length + 4)) as { code: string };
    assert.is(body.code, 'server_draining');
    const headConn = await open(draining.url);
    headConn.socket.write('HEAD /v1/test/close-status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await until(() => headConn.text().includes('\r\n\r\n'), 'the HEAD answer');
    await new Promise((r) => setTimeout(r, 100));
    assert.match(headConn.text(), /^HTTP\/1\.1 503 /);
    assert.ok(headConn.text().endsWith('\r\n\r\n'), 'no body after the HEAD answer');
    headConn.socket.destroy();
  } finally {
    draining.close();
  }
});

test.run();
