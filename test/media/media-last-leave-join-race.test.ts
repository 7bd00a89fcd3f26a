import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * `#applyChanges` closes a room's media and forgets its LiveRoom when the room's last member leaves. A `room.join` that
 * took that LiveRoom from `#liveRoom` just before, and whose `member.join` the actor applies just after the leave, was
 * admitted by the room actor but then answered from the closed RoomMedia (`media_unavailable`, "room … is closed"),
 * and the LiveRoom that recorded its connection was gone, so closing the socket recorded no drop. The person did
 * nothing wrong (someone else hung up as they joined): the join succeeds, on the LiveRoom this node keeps for the room.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const policy = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-review-leave-join', { directCalls: { enabled: false }, spaces: [{ id: 'hall', policy }] }));
});

test('a room.join racing the last member\'s room.leave is answered ok (never media_unavailable)', async () => {
  const lia = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'hall'), world.origin);
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'hall'), world.origin);
  const failures: string[] = [];
  for (let i = 0; i < 60 && failures.length === 0; i++) {
    assert.is((await lia.request('room.join', { rtpCapabilities: {} })).ok, true);
    const leaving = lia.request('room.leave');
    await sleep(i % 6);
    const joined = await mod.request('room.join', { rtpCapabilities: {} });
    await leaving;
    if (!joined.ok) failures.push(`${joined.error?.code}: ${joined.error?.message}`);
    else {
      // Served by the room this node keeps: the connection is recorded where its requests (and its drop) look.
      const send = await mod.request('transport.create', { direction: 'send' });
      if (!send.ok) failures.push(`joined, then transport.create: ${send.error?.code}: ${send.error?.message}`);
      assert.is((await mod.request('room.leave')).ok, true);
    }
  }
  lia.close();
  mod.close();
  assert.equal(failures, [], 'a join refused because someone else left at the same moment');
});

test('after a join racing the last leave, closing the joiner\'s socket records its drop (the room shows it dropped)', async () => {
  const lia = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'hall'), world.origin);
  const failures: string[] = [];
  for (let i = 0; i < 24 && failures.length === 0; i++) {
    assert.is((await lia.request('room.join', { rtpCapabilities: {} })).ok, true);
    const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'hall'), world.origin);
    const leaving = lia.request('room.leave');
    await sleep(i % 6);
    const joined = await mod.request('room.join', { rtpCapabilities: {} });
    await leaving;
    if (!joined.ok) {
      failures.push(`${joined.error?.code}: ${joined.error?.message}`);
      mod.close();
      break;
    }
    const modId = (joined.result?.self as { memberId: string }).memberId;
    mod.close();
    await mod.closed;
    let connection: string | undefined;
    for (let poll = 0; poll < 25 && connection !== 'dropped'; poll++) {
      await lia.request('room.join', { rtpCapabilities: {} });
      // The view of the join came before its answer.
      const view = lia.room();
      connection = view?.members.find((m) => m.memberId === modId)?.connection;
      if (connection !== 'dropped') await sleep(20);
    }
    if (connection !== 'dropped') failures.push(`the joiner's socket closed; the room holds it ${connection}`);
    // Empty the room for the next round: the dropped member comes back and leaves, then lia.
    const back = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'hall'), world.origin);
    assert.is((await back.request('room.join', { rtpCapabilities: {} })).ok, true);
    assert.is((await back.request('room.leave')).ok, true);
    back.close();
    assert.is((await lia.request('room.leave')).ok, true);
  }
  lia.close();
  assert.equal(failures, []);
});

test.run();
