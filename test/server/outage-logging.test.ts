import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { proxyDatabase, type TcpProxy } from '../support/tcp-proxy.js';
import { captureLogs } from '../support/log-capture.js';

/**
 * What the log says while Postgres is gone: a server fault is logged with the request id and its cause (the Runtime
 * plane's 503 included), but a dead dependency failing every request, socket and renewal round alike prints a few
 * lines, not one (or three) per failure. The server runs on the real database through a proxy the test cuts.
 */
interface Line {
  readonly level: number;
  readonly msg: string;
  readonly requestId?: string;
  readonly code?: string;
  readonly suppressed?: number;
  readonly err?: { message?: string; code?: string };
}
const { logger, lines } = captureLogs<Line>('info');

let db: TestDatabase;
let proxy: TcpProxy;
let server: RunningServer & { url: string };
let env: TestEnvironment;
const pages: RuntimeClient[] = [];
const sockets: Socket[] = [];

test.before(async () => {
  db = await createTestDatabase();
  let viaProxy: string;
  ({ proxy, url: viaProxy } = await proxyDatabase(db.url));
  // Leases of 10 s (the least allowed): the runtime sockets' renewal rounds run every 3.3 s.
  const config = loadConfig({ DATABASE_URL: viaProxy, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', RUNTIME_LEASE_TTL_SECONDS: '10' });
  const started = await startServer(config, productParts, { logger });
  server = { ...started, url: `http://127.0.0.1:${started.port}` };
  const people = await Promise.all(['ana', 'ben', 'cal', 'dee', 'eve'].map((handle) => runtimePerson(server, handle)));
  env = await testEnvironment(`http://127.0.0.1:${started.opsPort}`, 'outage-world', 'ana');
  for (const person of people) pages.push(await (await person.runtime(env)).open());
  for (const page of pages) sockets.push(await runtimeSocket(page));
  await Promise.all(sockets.map((s) => s.next('ready')));
});
test.after(async () => {
  for (const s of sockets) s.ws.close();
  await proxy.restore();
  await server.stop('test over');
  await proxy.close();
  await db.drop();
});

const warnings = (from: number) => lines.slice(from).filter((l) => l.level >= 40);
let cutAt = 0;

test('Postgres gone: fifty failing requests print a line or two, each kind of fault once with its request id and cause', async () => {
  cutAt = lines.length;
  await proxy.cut();
  const ids: string[] = [];
  const tokenRequest = () =>
    fetch(`${server.url}/v1/oidc/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: 'oac_nothing', code_verifier: 'v'.repeat(43), redirect_uri: env.redirectUri, client_id: env.clientId }),
    });
  for (let i = 0; i < 25; i++) {
    const [plain, runtime] = await Promise.all([tokenRequest(), pages[i % pages.length]!.read()]);
    assert.is(plain.status, 503, await plain.text());
    assert.is(runtime.status, 503, await runtime.text());
    ids.push(plain.headers.get('x-request-id')!, runtime.headers.get('x-request-id')!);
  }
  const ofRequests = warnings(cutAt).filter((l) => l.requestId !== undefined && ids.includes(l.requestId));
  assert.ok(ofRequests.length <= 4, `${ofRequests.length} warnings about 50 failed requests: ${[...new Set(ofRequests.map((l) => l.msg))].join(' | ')}`);
  assert.ok(ofRequests.some((l) => l.code === 'storage_unavailable' && l.err?.message !== undefined), 'the storage outage is logged with its request id and cause');
  assert.ok(
    ofRequests.some((l) => l.code === 'runtime_coordination_unavailable' && l.err !== undefined),
    `the Runtime plane's outage is logged with its request id and cause: ${JSON.stringify(ofRequests)}`,
  );
});

test('Postgres still gone: the background work (renewal rounds of five sockets, timer polls, the pools) adds a few lines, not one per socket per round', async () => {
  // Two renewal rounds (every 3.3 s), seven timer polls (every second).
  await new Promise((resolve) => setTimeout(resolve, 7_000));
  const loud = warnings(cutAt);
  const counts = Object.entries(loud.reduce((m: Record<string, number>, l) => ((m[l.msg] = (m[l.msg] ?? 0) + 1), m), {}));
  assert.ok(loud.length <= 16, `${loud.length} warnings in 7 s of outage: ${JSON.stringify(counts)}`);
  assert.ok(counts.every(([, n]) => n <= 2), `a failure repeated line by line: ${JSON.stringify(counts)}`);
});

test('Postgres still gone: twenty socket upgrades refused for it print a line or two, the first with its request id and cause', async () => {
  const from = lines.length;
  const statuses: number[] = [];
  for (let i = 0; i < 20; i++) {
    statuses.push(await runtimeSocket(pages[i % pages.length]!).then(
      (s) => (s.ws.close(), 101),
      (error: unknown) => (error as { status?: number }).status ?? 0,
    ));
  }
  assert.ok(statuses.every((s) => s === 503), `upgrades answered ${statuses.join(', ')}`);
  const refused = warnings(from).filter((l) => l.msg.startsWith('upgrade refused'));
  assert.ok(refused.length >= 1 && refused.length <= 2, `${refused.length} warnings about 20 upgrades refused for the outage`);
  assert.ok(refused[0]!.requestId !== undefined && refused[0]!.err !== undefined, JSON.stringify(refused[0]));
});

test.run();
