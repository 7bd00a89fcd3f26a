import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { startServer } from '../../server/server.js';
import { HttpError } from '../../transport/http/errors.js';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';
import { defineWebSocketEndpoint, mountWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { createTestDatabase } from '../support/database.js';
import { listenOnLoopback } from '../support/http.js';

/**
 * How refused WebSocket upgrades are logged: a client's refusal (4xx) is not worth a line at the default level, or a
 * stranger could fill the logs one bad token at a time; the server's own failure (5xx) is.
 */

/** Opens `url` with these subprotocols and resolves the HTTP status of the refusal; fails if the upgrade is admitted. */
function refusedStatus(url: string, protocols: string[]): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { origin: 'https://anywhere.example' });
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.on('open', () => reject(new Error('admitted')));
    ws.on('error', () => {});
  });
}

test('refused WebSocket upgrades from strangers are not logged one line each at the default level (info)', async () => {
  // The production default LOG_LEVEL is info: a logger at that level, its lines counted.
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _encoding, done) => void (lines.push(...chunk.toString().split('\n').filter(Boolean)), done()) });
  const own = await createTestDatabase();
  const other = await startServer(loadConfig({ DATABASE_URL: own.url, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1' }), productParts, { logger: pino({ level: 'info' }, sink) });
  try {
    const url = `ws://127.0.0.1:${other.port}/v1/runtime/control`;
    const before = lines.length;
    const junk = 100;
    for (let i = 0; i < junk; i++) assert.is(await refusedStatus(url, ['registry.v1.json', `registry.bearer.junk${i}`]), 401);
    const logged = lines.slice(before).filter((l) => l.includes('upgrade refused')).length;
    assert.ok(logged < junk / 10, `${logged} info lines for ${junk} upgrades refused to an unauthenticated client (HTTP refusals are logged at debug)`);
  } finally {
    await other.stop('test over');
    await own.drop();
  }
});

test('a 4xx upgrade refusal is logged at debug, a 5xx one at warn with its cause', async () => {
  const logs: Array<{ level: number; msg: string; status?: number; code?: string; err?: { message: string } }> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
  const app: TemplatedApp = uws.App();
  const refusing = (path: string, error: HttpError) =>
    defineWebSocketEndpoint<never, never, never>({
      path,
      name: path.slice(1),
      maxMessageBytes: 1024,
      maxBackpressureBytes: 64 * 1024,
      idleTimeoutSeconds: 8,
      inbound: null,
      async authenticate() {
        throw error;
      },
    });
  const deps = { logger, newRequestId: () => `req_${randomUUID()}` };
  mountWebSocketEndpoint(app, refusing('/stranger', new HttpError(401, 'token_invalid', 'a valid token is required')), deps);
  mountWebSocketEndpoint(app, refusing('/outage', new HttpError(503, 'storage_unavailable', 'storage is down')), deps);
  const port = await listenOnLoopback(app);
  try {
    assert.is(await refusedStatus(`ws://127.0.0.1:${port}/stranger`, ['registry.v1.json']), 401);
    assert.is(await refusedStatus(`ws://127.0.0.1:${port}/outage`, ['registry.v1.json']), 503);
    const refused = logs.filter((l) => l.msg === 'upgrade refused');
    assert.equal(refused.map((l) => [l.status, l.code, l.level]), [[401, 'token_invalid', 20], [503, 'storage_unavailable', 40]]);
    assert.is(refused[1]!.err?.message, 'storage is down');
  } finally {
    closeApp(app);
  }
});

test.run();
