import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { meetingPolicy, PureRoom } from '../support/media-room.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Grant scopes gate requests one by one (floor.take, hand.raise, speaker.accept need media:request-speak; produce and
 * screen.start need media:publish), and the ways to the room's scarce speaking places follow the same rules:
 *  - a join takes a free seat (an `open` floor, or a moderator) only for a grant that may request to speak, or a
 *    listen-only grant (connect + join-space) would take a speaker seat `floor.take` refuses it (`scope_missing`), and
 *    a member who may speak would then get `seats_full`;
 *  - `screen.start` needs media:publish: otherwise a grant that can never publish would take the room's one share, and
 *    everyone else would get `screen_busy`.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;

const base = { mode: 'meeting', maxParticipants: 10, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 };
const LISTEN_ONLY = ['media:connect', 'media:join-space'];

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage, liaPage } = await mediaWorld(server, 'media-review-scopes', {
    directCalls: { enabled: false },
    spaces: [
      { id: 'one-seat', policy: { ...base, maxSpeakerSeats: 1 } },
      { id: 'share', policy: { ...base, maxSpeakerSeats: 4 } },
      { id: 'moderated', policy: { ...base, floorControl: 'moderated', maxSpeakerSeats: 2 } },
    ],
  }));
});

test('open floor: a listen-only grant (no media:request-speak) is not seated by room.join; floor.take refuses it scope_missing', async () => {
  const lia = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'one-seat', LISTEN_ONLY), world.origin);
  const joined = await lia.request('room.join', { rtpCapabilities: {} });
  const take = await lia.request('floor.take');
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'one-seat'), world.origin);
  assert.is((await mod.request('room.join', { rtpCapabilities: {} })).ok, true);
  const modTake = await mod.request('floor.take');
  lia.close();
  mod.close();
  assert.is(take.error?.code, 'scope_missing', 'floor.take without media:request-speak');
  assert.equal(
    { listenOnlySeated: (joined.result?.self as { seated: boolean }).seated, speakerCanTakeTheSeat: modTake.ok },
    { listenOnlySeated: false, speakerCanTakeTheSeat: true },
    `the listen-only member holds the only seat; the moderator's floor.take: ${modTake.error?.code}`,
  );
});

test('moderated floor: a moderator whose grant lacks media:request-speak joins unseated; with it, seated', async () => {
  const listenOnly = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'moderated', LISTEN_ONLY), world.origin);
  const unseated = await listenOnly.request('room.join', { rtpCapabilities: {} });
  const leave = await listenOnly.request('room.leave');
  assert.is(leave.ok, true, JSON.stringify([unseated.error, leave.error]));
  listenOnly.close();
  const speaking = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'moderated'), world.origin);
  const seated = await speaking.request('room.join', { rtpCapabilities: {} });
  speaking.close();
  assert.equal(
    [(unseated.result?.self as { seated: boolean } | null)?.seated, (seated.result?.self as { seated: boolean } | null)?.seated],
    [false, true],
  );
});

test('screen.start without media:publish is refused scope_missing and does not take the one share from those who may publish', async () => {
  const lia = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'share', ['media:connect', 'media:join-space', 'media:request-speak']), world.origin);
  assert.is((await lia.request('room.join', { rtpCapabilities: {} })).ok, true);
  const share = await lia.request('screen.start');
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'share'), world.origin);
  assert.is((await mod.request('room.join', { rtpCapabilities: {} })).ok, true);
  const modShare = await mod.request('screen.start');
  lia.close();
  mod.close();
  assert.equal(
    { noPublishScope: share.ok ? 'sharing' : share.error?.code, publisher: modShare.ok ? 'sharing' : modShare.error?.code },
    { noPublishScope: 'scope_missing', publisher: 'sharing' },
  );
});

test('room machine: maySpeak false is never seated on join; absent (journaled before the field) seats as before', () => {
  const open = new PureRoom(meetingPolicy({ floorControl: 'open', maxSpeakerSeats: 2 }));
  assert.is(open.join('listener', { maySpeak: false }).seat, null);
  assert.is(open.join('speaker', { maySpeak: true }).seat, 0);
  assert.is(open.join('old', {}).seat, 1);
  const moderated = new PureRoom(meetingPolicy({ floorControl: 'moderated', maxSpeakerSeats: 2 }));
  assert.is(moderated.join('mod', { moderator: true, maySpeak: false }).seat, null);
  assert.is(moderated.join('mod2', { moderator: true, maySpeak: true }).seat, 0);
});

test.run();
