import { request } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { counterKind } from '../fixtures/counter.kind.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Without OPS_TOKEN the operator listener trusts loopback, so it answers only requests addressed to loopback and sent
 * by no web page: a page whose own name was rebound to 127.0.0.1 reaches the port but names itself in `Host`, and a
 * browser sends `Origin` (docs/decisions.md, Operator listener).
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), { kinds: [counterKind] });

/** A GET with exactly these headers (fetch would not let a test choose `Host`). */
function get(path: string, headers: Record<string, string>): Promise<{ status: number; code: string | undefined }> {
  const url = new URL(path, server.opsUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'GET', headers, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const code = res.headers['content-type']?.includes('json') ? (JSON.parse(text) as { error?: { code?: string } }).error?.code : undefined;
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

test('loopback names in Host are served: 127.0.0.1, localhost and [::1], with or without the port', async () => {
  const port = new URL(server.opsUrl).port;
  for (const host of [`127.0.0.1:${port}`, '127.0.0.1', `localhost:${port}`, `[::1]:${port}`]) {
    assert.is((await get('/actors', { host })).status, 200, host);
  }
});

test('any other Host is refused 403 operator_host_refused: a rebound name, a public or private address, a name that starts like loopback', async () => {
  const port = new URL(server.opsUrl).port;
  const cases: Record<string, string>[] = [{ host: `attacker.example:${port}` }, { host: 'registry.example' }, { host: `10.0.0.5:${port}` }, { host: `127.0.0.1.attacker.example:${port}` }];
  for (const headers of cases) {
    assert.equal(await get('/actors', headers), { status: 403, code: 'operator_host_refused' }, JSON.stringify(headers));
  }
});

test('a loopback Host with an Origin (a web page) is refused as well, on reads too', async () => {
  const host = new URL(server.opsUrl).host;
  assert.equal(await get('/actors', { host, origin: 'https://attacker.example' }), { status: 403, code: 'operator_host_refused' });
  assert.equal(await get('/metrics', { host, origin: 'null' }), { status: 403, code: 'operator_host_refused' });
});

test.run();
