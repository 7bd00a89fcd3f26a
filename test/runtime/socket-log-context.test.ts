import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runtimePerson, testEnvironment } from '../support/runtime.js';
import { connect, controlToken, controlUrl, runtimeSocket } from '../support/runtime-socket.js';
import { waitFor } from '../support/wait.js';
import { captureLogs } from '../support/log-capture.js';

/**
 * A socket's log lines say whose socket it is: the Runtime session (not only a connection id minted at the upgrade),
 * so an operator can follow a session from its HTTP calls to its sockets' closes and refusals.
 */
interface Line {
  readonly msg: string;
  readonly endpoint?: string;
  readonly connectionId?: string;
  readonly sessionId?: string;
  readonly code?: number;
}
const { logger, lines } = captureLogs<Line>('debug');

let db: TestDatabase;
let server: RunningServer & { url: string; opsUrl: string };

test.before(async () => {
  db = await createTestDatabase();
  const config = loadConfig({ DATABASE_URL: db.url, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1' });
  const started = await startServer(config, productParts, { logger });
  server = { ...started, url: `http://127.0.0.1:${started.port}`, opsUrl: `http://127.0.0.1:${started.opsPort}` };
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('the runtime and control sockets\' lines, opened to closed, carry the session id', async () => {
  const sam = await runtimePerson(server, 'sam');
  const env = await testEnvironment(server.opsUrl, 'logged-world', 'sam');
  const page = await (await sam.runtime(env)).open();
  const sessionId = page.sessionId!;
  const runtime = await runtimeSocket(page);
  await runtime.next('ready');
  const control = await connect(controlUrl(server.url), ['registry.v1.json', `registry.bearer.${await controlToken(page)}`], page.origin);
  runtime.ws.close(4321);
  control.ws.close(4321);
  await Promise.all([runtime.closed, control.closed]);
  for (const endpoint of ['runtime', 'runtime-control']) {
    const closed = await waitFor(() => lines.find((l) => l.endpoint === endpoint && l.msg === 'connection closed' && l.code === 4321), `the ${endpoint} close to be logged`);
    const opened = lines.find((l) => l.endpoint === endpoint && l.msg === 'connection opened' && l.connectionId === closed.connectionId);
    assert.equal([opened?.sessionId, closed.sessionId], [sessionId, sessionId], `${endpoint}: ${JSON.stringify([opened, closed])}`);
  }
});

test.run();
