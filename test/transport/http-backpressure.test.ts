import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { productParts } from '../../server/main.js';
import { PostgresIdempotencyStore } from '../../storage/postgres/idempotency-store.postgres.js';
import { apiSchema } from '../../transport/http/api-schemas.js';
import { defineRoute, FixedJson } from '../../transport/http/route.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startGateway, type TestGateway } from '../support/http.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * How the gateway writes answers to clients that read slowly or not at all: a client must not be able to make the
 * server hold its unread answers (pipelining, never reading), and a large reply still reaches a client that reads,
 * whole, however late.
 */
const OPS_TOKEN = 'operator-token-0123456789';
/** Larger than what loopback socket buffers take at once (about 4 MB here), so part of it must wait for the reader. */
const BIG_BYTES = 32 * 1024 * 1024;

const Big = apiSchema('TestBigDocument', z.strictObject({ text: z.string() }));
const bigDocument = new FixedJson({ text: 'x'.repeat(BIG_BYTES) });
/** Requests the big route has answered (its reply is then being written). */
let bigServed = 0;
const bigRoute = defineRoute({
  operationId: 'bigDocument',
  method: 'get',
  path: '/v1/test/big',
  summary: 'A reply larger than a socket takes at once',
  tags: ['Test'],
  credential: 'none',
  errorFormat: 'api',
  responses: { 200: { description: 'The document.', schema: Big } },
  handler: async () => {
    bigServed += 1;
    return { status: 200, body: bigDocument };
  },
});

let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let gateway: TestGateway;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, { OPS_TOKEN });
  const idempotency = new PostgresIdempotencyStore(db.connection.db, { retentionSeconds: 3600, claimTimeoutSeconds: 60 });
  gateway = await startGateway({ routes: [bigRoute], idempotency });
});
test.after(async () => {
  gateway.close();
  await server.stop('test over');
  await db.drop();
});

/** A raw connection that sends `request` and reads nothing until told to. */
async function unreadConnection(url: string, request: string): Promise<Socket> {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  socket.pause();
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(request);
  return socket;
}

/** Everything the socket delivers from now until the server closes it. */
function readToEnd(socket: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('close', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
    socket.resume();
  });
}

test('pipelined requests whose answers are never read do not make the server buffer without bound', async () => {
  const size = (await (await fetch(`${server.url}/v1/openapi.json`)).arrayBuffer()).byteLength;
  const answered = async (): Promise<number> => {
    const text = await (await fetch(`${server.opsUrl}/metrics`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } })).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith('registry_http_requests_total{') && l.includes('operation="getOpenApiDocument"'))
      .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
  };
  const before = await answered();
  const rssBefore = process.memoryUsage().rss;
  // One unauthenticated connection, about 100 KB of pipelined GETs, and not one byte read back.
  const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
  socket.pause();
  await new Promise((resolve) => socket.once('connect', resolve));
  const one = 'GET /v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  for (let i = 0; i < 20; i++) socket.write(one.repeat(100));
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const produced = (await answered()) - before;
  const grownMb = Math.round((process.memoryUsage().rss - rssBefore) / 1e6);
  socket.destroy();
  const heldMb = Math.round((produced * size) / 1e6);
  assert.ok(heldMb <= 16, `the server produced ${produced} answers of ${size} bytes (${heldMb} MB) for a client that read none; RSS grew ${grownMb} MB`);
});

test('a reply larger than the socket takes at once reaches a client that reads late, whole and in order', async () => {
  const served = bigServed;
  const socket = await unreadConnection(gateway.url, 'GET /v1/test/big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  // The reply is being written; then long enough for the first write to fill the socket and the rest to wait on onWritable.
  await waitFor(() => bigServed > served, 'the big reply to start');
  await new Promise((resolve) => setTimeout(resolve, 300));
  const received = await readToEnd(socket);
  const split = received.indexOf('\r\n\r\n');
  const head = received.subarray(0, split).toString('latin1');
  const body = received.subarray(split + 4);
  assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
  const expected = Buffer.from(JSON.stringify({ text: 'x'.repeat(BIG_BYTES) }));
  assert.match(head, new RegExp(`\r\ncontent-length: ${expected.length}(\r\n|$)`, 'i'));
  assert.is(body.length, expected.length);
  assert.is(createHash('sha256').update(body).digest('hex'), createHash('sha256').update(expected).digest('hex'));
});

test('a second request sent while a reply waits for its reader ends that connection, not just that request', async () => {
  // uWS's rule (one unfinished response per connection) is what bounds a pipelining client to one waiting reply.
  const request = 'GET /v1/test/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  const served = bigServed;
  const socket = await unreadConnection(gateway.url, request);
  // The second request must arrive while the first reply waits for its reader: after that reply started.
  await waitFor(() => bigServed > served, 'the first reply to start');
  await new Promise((resolve) => setTimeout(resolve, 100));
  socket.write(request);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const received = await readToEnd(socket);
  assert.ok(received.length < BIG_BYTES, `${received.length} bytes: the first reply was not finished and no second one began`);
  assert.is(received.toString('latin1').split('HTTP/1.1 200 OK').length - 1, 1, 'one status line');
});

test.run();
