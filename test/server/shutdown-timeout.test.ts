import { connect } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { createTestDatabase } from '../support/database.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * SHUTDOWN_TIMEOUT_MS: how long a stop waits for requests in flight (README, Configuration; docs/decisions.md, Shutdown). A request
 * that never finishes (its client stopped sending half-way through the body) holds the stop that long, and no longer.
 */
const TIMEOUT_MS = 800;

test('a stop waits SHUTDOWN_TIMEOUT_MS for a request that never finishes, then goes on and completes', async () => {
  const db = await createTestDatabase();
  const server = await startTestServer(db.url, productParts, { SHUTDOWN_TIMEOUT_MS: String(TIMEOUT_MS) });
  const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
  socket.on('error', () => {});
  try {
    socket.write('POST /v1/auth/passports/introspect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pass');
    const inFlight = async (): Promise<number> => {
      const text = await (await fetch(`${server.opsUrl}/metrics`)).text();
      return Number(text.split('\n').find((l) => l.startsWith('registry_http_requests_in_flight'))?.split(' ').at(-1));
    };
    await waitFor(async () => ((await inFlight()) === 1 ? true : undefined), 'the partial request to be in flight');
    const started = performance.now();
    await server.stop('test');
    const waited = performance.now() - started;
    assert.ok(waited >= TIMEOUT_MS - 50, `the stop waited for the request in flight: ${Math.round(waited)} ms`);
    assert.ok(waited < TIMEOUT_MS + 4_000, `and went on once the timeout passed: ${Math.round(waited)} ms`);
  } finally {
    socket.destroy();
    await db.drop();
  }
});

test.run();
