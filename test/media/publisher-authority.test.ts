import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizePublisher, type PublisherAuthorityDecision } from '../../media/publisher-authority/publisher-authority.client.js';
import {
  PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES,
  PUBLISHER_AUTHORITY_TIMEOUT_MS,
  PublisherAuthorityRequestSchema,
} from '../../media/publisher-authority/publisher-authority.messages.js';
import { buildPublisherAuthorityOpenApi, publisherAuthorityOpenApiText } from '../../media/publisher-authority/publisher-authority.openapi.js';
import { redoclyLint } from '../support/redocly.js';
import { PUBLISHER_AUTHORITY_REQUEST } from '../support/media-control.js';

/**
 * The publisher-authority callback against a real node:http Environment backend on 127.0.0.1 (loopback allowed, as
 * MEDIA_CALLBACK_ALLOW_LOOPBACK=1 does): the allow path, and every way an answer fails, each of which must deny. Timeouts use short limits except the one test of the default.
 */
type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** How late the slow routes answer: well past the short limits, and past the default by more than a loaded machine's timer lag. */
const SLOW_MS = 1_500;

const routes: Record<string, Handler> = {
  '/allow': (_req, res) => json(res, 200, { decision: 'allow', reason: 'holds the speaker role' }),
  '/deny': (_req, res) => json(res, 200, { decision: 'deny', reason: 'not a speaker here' }),
  '/maybe': (_req, res) => json(res, 200, { decision: 'maybe' }),
  '/no-decision': (_req, res) => json(res, 200, { allowed: true }),
  '/not-json': (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"decision": allow'),
  '/redirect': (_req, res) => res.writeHead(307, { location: '/allow' }).end(),
  '/moved': (_req, res) => res.writeHead(301, { location: '/allow' }).end(),
  '/status-500': (_req, res) => json(res, 500, { decision: 'allow' }),
  '/status-201': (_req, res) => json(res, 201, { decision: 'allow' }),
  '/status-403': (_req, res) => json(res, 403, { decision: 'deny' }),
  // Streamed (no content-length): the client must stop reading past the limit rather than trust a header. The body
  // never ends: a client that read on to the end could only stop at its timeout.
  '/huge-stream': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(`{"decision":"allow","reason":"${'x'.repeat(3000)}`);
    res.write('x'.repeat(3000));
  },
  '/huge-declared': (_req, res) => {
    const body = JSON.stringify({ decision: 'allow', reason: 'y'.repeat(5000) });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  },
  '/exactly-at-limit': (_req, res) => {
    const filler = PUBLISHER_AUTHORITY_MAX_RESPONSE_BYTES - JSON.stringify({ decision: 'allow', pad: '' }).length;
    json(res, 200, { decision: 'allow', pad: ' '.repeat(filler) });
  },
  '/slow': (_req, res) => void setTimeout(() => json(res, 200, { decision: 'allow' }), SLOW_MS).unref(),
  '/slower-than-default': (_req, res) => void setTimeout(() => json(res, 200, { decision: 'allow' }), PUBLISHER_AUTHORITY_TIMEOUT_MS + SLOW_MS).unref(),
  '/stalled-body': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"decision":');
    setTimeout(() => res.end('"allow"}'), SLOW_MS).unref();
  },
};

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

let server: Server;
let base: string;
const received: Array<{ method: string; path: string; contentType: string | undefined; body: string }> = [];

test.before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', path: req.url ?? '', contentType: req.headers['content-type'], body });
      const handler = routes[req.url ?? ''];
      if (handler) handler(req, res, body);
      else json(res, 404, { error: 'no such route' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
test.after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const body = PUBLISHER_AUTHORITY_REQUEST;
// The backend is on this host: loopback must be allowed (MEDIA_CALLBACK_ALLOW_LOOPBACK); publisher-authority-destination.test.ts covers the refusals.
const PUBLISH = { grantScopes: ['media:connect', 'media:publish'], allowLoopback: true };

async function ask(path: string, options: Partial<Parameters<typeof authorizePublisher>[2]> = {}): Promise<PublisherAuthorityDecision> {
  return authorizePublisher(`${base}${path}`, body, { ...PUBLISH, ...options });
}

function hits(path: string): number {
  return received.filter((r) => r.path === path).length;
}

test('allow: one POST of the JSON body to the address as given; only an explicit allow allows', async () => {
  const before = received.length;
  assert.equal(await ask('/allow'), { allowed: true, reason: 'allowed', detail: 'holds the speaker role' });
  const sent = received.slice(before);
  assert.is(sent.length, 1);
  assert.is(sent[0]!.method, 'POST');
  assert.is(sent[0]!.contentType, 'application/json');
  assert.equal(JSON.parse(sent[0]!.body), body);
  assert.ok(PublisherAuthorityRequestSchema.safeParse(JSON.parse(sent[0]!.body)).success);
});

test('the backend denies: deny, with its reason kept for logs', async () => {
  assert.equal(await ask('/deny'), { allowed: false, reason: 'denied', detail: 'not a speaker here' });
});

test('a grant without media:publish is refused before anything is sent', async () => {
  const before = received.length;
  const decision = await ask('/allow', { grantScopes: ['media:connect', 'media:join-space'] });
  assert.is(decision.allowed, false);
  assert.is(decision.reason, 'grant_lacks_publish_scope');
  assert.is(received.length, before, 'the backend was not asked');
});

test('an address backendEndpoint() refuses, or a malformed request, is denied without a call', async () => {
  const before = received.length;
  for (const url of ['http://backend.example/authority', `${base.replace('http://', 'http://user:pw@')}/allow`, `${base}/allow#frag`, 'not a url']) {
    assert.is((await authorizePublisher(url, body, PUBLISH)).reason, 'url_invalid', url);
  }
  const malformed = await authorizePublisher(`${base}/allow`, { ...body, source: 'camera' as 'screen', spaceId: 'Town Hall' }, PUBLISH);
  assert.is(malformed.reason, 'request_invalid');
  assert.match(malformed.detail ?? '', /source/);
  assert.is(received.length, before);
});

test('redirects are errors and are never followed (307 and 301)', async () => {
  const allowHits = hits('/allow');
  for (const path of ['/redirect', '/moved']) {
    const decision = await ask(path);
    assert.equal([decision.allowed, decision.reason], [false, 'redirect'], path);
  }
  assert.is(hits('/allow'), allowHits, 'the Location was not requested');
});

test('any status other than 200 denies, whatever the body says', async () => {
  for (const [path, status] of [['/status-500', 500], ['/status-201', 201], ['/status-403', 403], ['/nowhere', 404]] as const) {
    assert.equal(await ask(path), { allowed: false, reason: 'status', detail: `status ${status}` }, path);
  }
});

test('a body over 4096 bytes denies: streamed (reading stops) or declared by content-length', async () => {
  // The streamed body never ends: waiting for its end would be a timeout, not response_too_large.
  assert.is((await ask('/huge-stream')).reason, 'response_too_large', 'the client stopped reading instead of waiting for the end of the body');
  assert.is((await ask('/huge-declared')).reason, 'response_too_large');
  assert.is((await ask('/exactly-at-limit')).reason, 'allowed', '4096 bytes exactly is within the limit');
});

test('a body that is not JSON, or not the response shape, denies', async () => {
  assert.is((await ask('/not-json')).reason, 'response_not_json');
  for (const path of ['/maybe', '/no-decision']) {
    const decision = await ask(path);
    assert.equal([decision.allowed, decision.reason], [false, 'response_invalid'], path);
  }
});

test('no answer within the timeout denies, and so does a body that stalls past it', async () => {
  // Each route answers (or ends its body) SLOW_MS after the request, far past 150 ms: a timeout means the limit ended it.
  const started = Date.now();
  assert.equal(await ask('/slow', { timeoutMs: 150 }), { allowed: false, reason: 'timeout', detail: 'no answer within 150 ms' });
  assert.ok(Date.now() - started < SLOW_MS, 'it did not wait for the answer');
  assert.is((await ask('/stalled-body', { timeoutMs: 150 })).reason, 'timeout');
  assert.is((await ask('/slow', { timeoutMs: SLOW_MS + 8_000 })).reason, 'allowed', 'a slow answer inside the limit counts');
});

test('the default timeout is the spec\'s 2000 ms', async () => {
  const started = Date.now();
  const decision = await ask('/slower-than-default');
  const elapsed = Date.now() - started;
  assert.is(decision.reason, 'timeout');
  // Not before the default, and after it by no more than a loaded machine's timer lag (the answer comes SLOW_MS after).
  assert.ok(elapsed >= PUBLISHER_AUTHORITY_TIMEOUT_MS - 20 && elapsed < PUBLISHER_AUTHORITY_TIMEOUT_MS + 1_000, `${elapsed} ms`);
});

test('a network failure denies: nothing listens on the port', async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const decision = await authorizePublisher(`http://127.0.0.1:${port}/allow`, body, PUBLISH);
  assert.equal([decision.allowed, decision.reason], [false, 'network_error']);
});

test('publisher-authority-api: OpenAPI 3.1.0, operation authorizePublisher, the spec\'s limits, passes redocly lint', async () => {
  const doc = buildPublisherAuthorityOpenApi('0.1.0-alpha.29') as {
    openapi: string;
    webhooks: Record<string, { post: Record<string, unknown> & { requestBody: unknown; responses: Record<string, unknown> } }>;
    components: { schemas: Record<string, { required?: string[]; additionalProperties?: boolean; properties: Record<string, Record<string, unknown>> }> };
  };
  assert.is(doc.openapi, '3.1.0');
  const operation = doc.webhooks.authorizePublisher!.post;
  assert.is(operation.operationId, 'authorizePublisher');
  assert.equal(
    [operation['x-timeout-ms'], operation['x-max-response-bytes'], operation['x-redirects'], operation['x-on-failure']],
    [2000, 4096, 'error', 'deny'],
  );
  const request = doc.components.schemas.PublisherAuthorityRequest!;
  assert.equal(request.required?.slice().sort(), ['actorId', 'environmentId', 'grant', 'requestId', 'scope', 'source', 'spaceId']);
  assert.is(request.additionalProperties, false);
  assert.equal(request.properties.source!.enum, ['microphone', 'screen']);
  const response = doc.components.schemas.PublisherAuthorityResponse!;
  assert.equal(response.required, ['decision']);
  assert.equal(response.properties.decision!.enum, ['allow', 'deny']);
  const report = await redoclyLint(publisherAuthorityOpenApiText('0.1.0-alpha.29'));
  assert.equal([report.totals.errors, report.totals.warnings], [0, 0], JSON.stringify(report.problems));
});

test.run();
