import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { ALL_MEDIA_SCOPES, configureMedia, mediaGrant, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * grant.refresh takes only a grant that keeps every scope of the current one: moved onto a narrower grant, the
 * connection kept what the old one authorised (a microphone producer under media:publish) after that grant was
 * revoked. Refused, the connection stays on its grant, and revoking it ends the connection and its media.
 */
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;
const liveProducers = new Set<types.Producer>();
mediasoup.observer.on('newworker', (w) =>
  w.observer.on('newrouter', (r) =>
    r.observer.on('newtransport', (t) =>
      t.observer.on('newproducer', (p) => {
        liveProducers.add(p);
        p.observer.once('close', () => liveProducers.delete(p));
      }),
    ),
  ),
);
const policy = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 };
const MIC = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 777 }] };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  const sam = await runtimePerson(server, 'speaker-sam');
  world = await testEnvironment(server.opsUrl, 'media-review-refresh', 'speaker-sam');
  await configureMedia(server.opsUrl, world.environmentId, { directCalls: { enabled: false }, spaces: [{ id: 'room', policy }] });
  page = await (await sam.runtime(world)).open();
});

test('a refresh to a grant without media:publish is refused; revoking the grant that has it ends the connection and its producer', async () => {
  const res = await page.pluginGrant('plg_media', { component: 'control', scopes: ALL_MEDIA_SCOPES, context: { scope: 'room' } });
  const { grant, grantId } = (await res.json()) as { grant: string; grantId: string };
  const conn = await MediaControlClient.connect(server.url, grant, world.origin);
  assert.is((await conn.request('room.join', { rtpCapabilities: {} })).ok, true);
  const transportId = (await conn.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await conn.request('produce', { transportId, kind: 'audio', source: 'microphone', rtpParameters: MIC });
  assert.is(produced.ok, true, JSON.stringify(produced.error));
  const producerId = produced.result?.producerId as string;

  const narrower = await mediaGrant(page, 'room', ['media:connect']);
  const refreshed = await conn.request('grant.refresh', { grant: narrower });
  assert.equal([refreshed.ok, refreshed.error?.code], [false, 'media_grant_invalid']);
  const del = await fetch(`${server.url}/v1/runtime/plugins/plg_media/grants/${grantId}`, { method: 'DELETE', headers: page.headers() });
  assert.is(del.status, 204);
  await waitFor(() => conn.closeCode !== undefined && ![...liveProducers].some((p) => p.id === producerId && !p.closed), 'the connection and its producer to end with the revoked grant');
});

test.run();
