import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MEDIA_LIMITS } from '../../media/control/media-control.messages.js';
import { productParts } from '../../server/main.js';
import { FULL_STAGE, mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * media-plugin.md, Limits: `maxMessageBytes` 16384. A client message of exactly that many bytes is read (an invalid
 * one is refused in-band, the connection stays); one byte more closes the connection 1009. No room is joined, so no
 * mediasoup worker starts.
 */
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, liaPage: page } = await mediaWorld(server, 'size-world', { directCalls: { enabled: false }, spaces: [{ id: 'town-hall', policy: FULL_STAGE }] }));
});

/** A JSON text frame of exactly `bytes` bytes (a ping with a member the schema does not know). */
function frameOf(bytes: number): string {
  const empty = JSON.stringify({ type: 'ping', id: 'big', pad: '' });
  const frame = JSON.stringify({ type: 'ping', id: 'big', pad: 'a'.repeat(bytes - empty.length) });
  assert.is(Buffer.byteLength(frame), bytes);
  return frame;
}

test(`a message of exactly ${MEDIA_LIMITS.maxMessageBytes} bytes is read; one byte more closes 1009`, async () => {
  assert.is(MEDIA_LIMITS.maxMessageBytes, 16_384);
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(page, 'town-hall'), world.origin);
  conn.sendRaw(frameOf(MEDIA_LIMITS.maxMessageBytes));
  // Read and judged by the schema: an in-band refusal, and the connection still answers.
  assert.is((await conn.request('ping')).ok, true);
  assert.ok(conn.pushes.some((p) => p.type === 'error'), 'the invalid message was refused in-band');
  assert.is(conn.closeCode, undefined);
  conn.sendRaw(frameOf(MEDIA_LIMITS.maxMessageBytes + 1));
  assert.is(await conn.closed, 1009);
});

test.run();
