import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { buildOpenApiDocument } from '../../transport/http/openapi.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The served OpenAPI description states the limits this server applies, not the defaults: a client that trusts
 * "replayed for 24 hours" while the operator set IDEMPOTENCY_RETENTION_SECONDS to an hour retries into a second
 * application, and one told 6,000 assertion ids per device is refused at DEVICE_ASSERTIONS_PER_DEVICE.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts, {
  IDEMPOTENCY_RETENTION_SECONDS: '3600',
  DEVICE_ASSERTIONS_PER_DEVICE: '600',
  RUNTIME_EVICTIONS_PER_MINUTE: '4',
  RUNTIME_SESSIONS_PER_ENVIRONMENT: '7',
  RUNTIME_SESSION_IDLE_SECONDS: '600',
  RUNTIME_LEASE_TTL_SECONDS: '45',
  ACTOR_ENDED_RETENTION_DAYS: '9',
});

const descriptionOf = (doc: unknown): string => (doc as { info: { description: string } }).info.description;

test('the served description names the configured idempotency retention and per-device assertion ids', async () => {
  const text = descriptionOf(await (await fetch(`${server.url}/v1/openapi.json`)).json());
  assert.match(text, /run at most once per caller and key for 1 hour:/);
  assert.match(text, /a device may hold 600 of them at once \(10 requests a\s+second sustained\)/);
  assert.not.match(text, /24 hours|6,000/);
});

test("the Runtime session operations name the eviction quota, session cap, idle time, lease lifetime and retention this server applies", async () => {
  const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, { description: string }>> };
  const create = doc.paths['/v1/runtime/session']!.post!.description.replace(/\s+/g, ' ');
  const activate = doc.paths['/v1/runtime/session/activate']!.post!.description.replace(/\s+/g, ' ');
  // registry-api.md, Limits: the eviction quota is "limited per minute", its number "not shown": ours is the one configured.
  assert.match(activate, 'a bucket of 4 (`RUNTIME_EVICTIONS_PER_MINUTE`)');
  assert.match(activate, 'lapses 45 seconds (`RUNTIME_LEASE_TTL_SECONDS`) after');
  assert.match(create, 'at most 7 (`RUNTIME_SESSIONS_PER_ENVIRONMENT`) sessions');
  assert.match(create, 'for 9 days (`ACTOR_ENDED_RETENTION_DAYS`)');
  assert.match(create, 'the platform 600 seconds (`RUNTIME_SESSION_IDLE_SECONDS`) after');
  assert.not.match(`${create} ${activate}`, /default \d+/);
});

test('without configuration, the defaults: a day, and 6,000 ids (100 requests a second)', () => {
  const text = descriptionOf(buildOpenApiDocument([], { serverUrl: 'http://127.0.0.1', tags: {} }));
  assert.match(text, /for 24 hours:/);
  assert.match(text, /6,000 of them at once \(100 requests a\s+second sustained\)/);
});

test.run();
