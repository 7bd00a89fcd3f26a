import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { productParts } from '../../server/main.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import type { TestDatabase } from '../support/database.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { runtimeSocket } from '../support/runtime-socket.js';
import { waitFor } from '../support/wait.js';

/**
 * docs/decisions.md: "When the stores cannot answer: 503 runtime_coordination_unavailable" and an outage is "never a 500". The
 * runtime socket's `presence.update` goes through the session actor (and the lease actor when that is not in memory)
 * outside `coordinated()`, so an outage met there reaches the WebSocket framework as an unknown throw: the client is
 * told `internal_error` ("the server failed") and the server logs it at error level with a stack, once per message.
 *
 * Real outage: the session and lease actors passivate (idle), then the database refuses connections.
 */
let server: TestServer;
let db: TestDatabase;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let ida: RuntimePerson;

withTestServer(test, (started) => ({ server, db } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: '3600' }, clock);
test.before(async () => {
  ida = await runtimePerson(server, 'ida');
  ida.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'idas-world', 'ida');
});

async function admin<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

test('presence.update while the stores cannot answer: told runtime_coordination_unavailable in band, the socket stays open', async () => {
  const page = await (await ida.runtime(env)).open();
  const socket = await runtimeSocket(page);
  await socket.next('ready');
  const { host } = server.services;
  // Idle for longer than ACTOR_PASSIVATE_AFTER_MS (5 min): the sweep (every 30 s of the host clock) passivates both actors.
  for (let i = 0; i < 14; i++) {
    clock.advance(30_000);
    await new Promise((r) => setTimeout(r, 10));
  }
  await waitFor(() => host.inspect('runtime-session', page.sessionId!) === undefined || undefined, 'the session actor passivated');

  const name = new URL(db.url).pathname.slice(1);
  await admin(async (c) => {
    await c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    // Every backend of the server's pool, but not the one holding the server's advisory lock (its loss stops the server).
    await c.query(
      `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
        WHERE a.datname = $1 AND a.pid <> pg_backend_pid()
          AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory')`,
      [name],
    );
  });
  try {
    socket.send({ type: 'presence.update', state: 'away', ref: 'p1' });
    const answer = await waitFor(() => socket.messages.find((m) => m.type === 'error' || m.type === 'presence.updated'), 'an answer to presence.update', 20_000);
    assert.is(answer.type, 'error', JSON.stringify(answer));
    assert.is(answer.code, 'runtime_coordination_unavailable', `an outage is told as one, got ${JSON.stringify(answer)}`);
  } finally {
    await admin((c) => c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`));
    socket.ws.close();
  }
});

test.run();
