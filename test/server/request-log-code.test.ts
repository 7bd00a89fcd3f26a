import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/wait.js';
import { captureLogs } from '../support/log-capture.js';

/**
 * A refused request's log line names the refusal's code, as its answer does: an operator given a request id learns
 * why it was refused (which of an operation's 401s or 400s) from the log, without the client's copy of the body.
 */
interface Line {
  readonly msg: string;
  readonly requestId?: string;
  readonly status?: number;
  readonly code?: string;
}
const { logger, lines } = captureLogs<Line>('debug');

let db: TestDatabase;
let server: RunningServer & { url: string };

test.before(async () => {
  db = await createTestDatabase();
  const config = loadConfig({ DATABASE_URL: db.url, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1' });
  const started = await startServer(config, productParts, { logger });
  server = { ...started, url: `http://127.0.0.1:${started.port}` };
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('the request line of a refusal carries its code: refused by the credential, by the handler, or by no route', async () => {
  const refusals = [
    await fetch(`${server.url}/v1/runtime/session`, { headers: { authorization: 'Bearer not-a-runtime-token' } }),
    await fetch(`${server.url}/v1/oidc/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: 'oac_nothing', code_verifier: 'v'.repeat(43), redirect_uri: 'https://x.example/cb', client_id: 'nobody' }),
    }),
    await fetch(`${server.url}/v1/nowhere`),
  ];
  for (const res of refusals) {
    // The three bodies: problem+json's `code`, the API's `error.code`, OAuth's `error`.
    const body = (await res.json()) as { code?: string; error?: string | { code: string } };
    const code = body.code ?? (typeof body.error === 'string' ? body.error : body.error?.code);
    const requestId = res.headers.get('x-request-id')!;
    const line = await waitFor(() => lines.find((l) => l.requestId === requestId && l.msg === 'request'), `the line of ${requestId}`);
    assert.ok(res.status >= 400 && res.status < 500, `${res.status}`);
    assert.is(line.code, code, JSON.stringify({ line, body }));
  }
});

test.run();
