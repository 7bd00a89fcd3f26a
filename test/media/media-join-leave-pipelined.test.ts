import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The control plane's idea of who is in a room (whose connection it serves media to) must be the room actor's. A
 * join is applied by the room, then installed for the connection a step later: a leave the room applied after that
 * join (the same connection's, sent right behind it) used to be applied in between, so the join then installed a
 * connection the room no longer held. That connection was refused every room request (`not_member`) yet served every
 * media one: transports, and consumers of everyone's producers, while absent from the room view and uncounted by
 * maxParticipants.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const CAPS = { codecs: [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48_000, channels: 2, preferredPayloadType: 100 }] };
const MICROPHONE = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 4242 }] };
const outcome = (r: { ok: boolean; error?: { code: string } }): string => (r.ok ? 'ok' : (r.error?.code ?? 'refused'));

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-join-leave', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 5, maxSpeakerSeats: 2, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 } }],
  }));
});

test('room.join and room.leave sent back to back: a connection the room does not hold is never served media', async () => {
  const speaker = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'room'), world.origin);
  assert.is((await speaker.request('room.join', { rtpCapabilities: CAPS })).ok, true);
  const send = (await speaker.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await speaker.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE });
  assert.is(produced.ok, true, JSON.stringify(produced.error));
  const producerId = produced.result?.producerId as string;

  const member = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'room'), world.origin);
  const patterns = [['room.join', 'room.leave'], ['room.leave', 'room.join', 'room.leave'], ['room.join', 'room.join', 'room.leave']];
  const served: string[] = [];
  for (let i = 0; i < 60 && served.length === 0; i++) {
    assert.is((await member.request('room.join', { rtpCapabilities: CAPS })).ok, true);
    await Promise.all(patterns[i % patterns.length]!.map((type) => member.request(type, type === 'room.join' ? { rtpCapabilities: CAPS } : {})));
    // The room's answer first: a request it refuses `not_member` means it does not hold this member.
    const inRoom = outcome(await member.request('floor.release')) !== 'not_member';
    if (inRoom) {
      await member.request('room.leave');
      continue;
    }
    const recv = await member.request('transport.create', { direction: 'recv' });
    if (recv.ok) {
      const consumed = await member.request('consume', { transportId: recv.result?.transportId, producerId });
      served.push(`iteration ${i}: transport.create ok, consume ${outcome(consumed)}`);
    }
  }
  const view = await speaker.view();
  speaker.close();
  member.close();
  assert.equal(served, [], 'a connection the room refused not_member was served media');
  assert.ok(view.members.length >= 1);
});

test.run();
