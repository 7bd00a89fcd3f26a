import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { ROOM_STATE_INTERVAL_MS, RoomViewAssembler } from '../../media/control/media-control.messages.js';
import { productParts } from '../../server/main.js';
import { FULL_STAGE, mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A burst of changes in a crowded room (everyone raising a hand at once on a stage) does not send every member the
 * whole room view once per change: the views of one room leave at most once per ROOM_STATE_INTERVAL_MS (besides the
 * one a requester gets before its own response), every member still ends on the latest view, and no other message
 * overtakes the view it followed.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;
let extraPage: RuntimeClient;
const crowd: RuntimeClient[] = [];
const CROWD = 30;

const OPUS_CAPS = { codecs: [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48_000, channels: 2, preferredPayloadType: 100 }] };
const MIC = { mid: '0', codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 5151 }] };

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage } = await mediaWorld(server, 'media-state-burst', { directCalls: { enabled: false }, spaces: [{ id: 'arena', policy: FULL_STAGE }] }));
  // Enrolment start admits bursts of 20 per client address.
  for (let i = 0; i < CROWD; i += 1) {
    const person = await runtimePerson(server, `burst-${String(i).padStart(2, '0')}`, world, `127.0.0.${2 + Math.floor(i / 20)}`);
    crowd[i] = await (await person.runtime()).open();
  }
  extraPage = await (await (await runtimePerson(server, 'burst-extra', world, '127.0.0.9')).runtime()).open();
});

const states = (c: MediaControlClient) => c.pushes.filter((p): p is Extract<typeof p, { type: 'room.state' }> => p.type === 'room.state');
const lastState = (c: MediaControlClient) => c.room();

test(`${CROWD} listeners raise their hands at once: each member gets a bounded number of room.state frames and all end on the final view`, async () => {
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'arena'), world.origin);
  assert.is((await mod.request('room.join', { rtpCapabilities: OPUS_CAPS })).ok, true);
  const listeners: MediaControlClient[] = [];
  for (const page of crowd) {
    const c = await MediaControlClient.connect(server.url, await mediaGrant(page, 'arena', ['media:connect', 'media:join-space', 'media:request-speak']), world.origin);
    assert.is((await c.request('room.join', { rtpCapabilities: OPUS_CAPS })).ok, true);
    listeners.push(c);
  }
  const everyone = [mod, ...listeners];
  // Quiet room: every join's view has arrived everywhere.
  await new Promise((r) => setTimeout(r, 3 * ROOM_STATE_INTERVAL_MS + 200));
  const before = everyone.map((c) => states(c).length);

  const started = performance.now();
  // Each response must follow a view that already shows the requester's own hand (the order of a request's view and
  // its response is kept).
  const ownHandShown = await Promise.all(
    listeners.map(async (c, i) => {
      const memberId = (c.pushes.find((p) => p.type === 'hello') as { memberId: string }).memberId;
      const answer = await c.request('hand.raise');
      assert.ok(answer.ok, `raise ${i}: ${JSON.stringify(answer.error)}`);
      return lastState(c)?.handQueue.includes(memberId) ?? false;
    }),
  );
  const elapsed = performance.now() - started;
  assert.ok(ownHandShown.every(Boolean), 'a hand.raise response arrived before a room.state showing that hand');

  // Converged: the last view of each member is the same, and has every hand.
  let finalRevision = -1;
  for (let waited = 0; waited < 5000; waited += 50) {
    const revisions = everyone.map((c) => lastState(c)?.revision ?? -1);
    finalRevision = Math.max(...revisions);
    if (revisions.every((r) => r === finalRevision) && lastState(mod)!.handQueue.length === CROWD) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 2 * ROOM_STATE_INTERVAL_MS));
  const finals = everyone.map((c) => lastState(c)!);
  assert.ok(finals.every((v) => v.revision === finalRevision), `revisions ${finals.map((v) => v.revision).join(',')}`);
  assert.ok(finals.every((v) => JSON.stringify(v) === JSON.stringify(finals[0])), 'every member ends on the same view');
  assert.is(finals[0]!.handQueue.length, CROWD);

  // A member gets at most one view per interval the burst lasted (plus the edges), and a requester one more before its
  // response; one view per change would be CROWD each.
  const received = everyone.map((c, i) => states(c).length - before[i]!);
  const bound = Math.ceil((elapsed + 2 * ROOM_STATE_INTERVAL_MS) / ROOM_STATE_INTERVAL_MS) + 2;
  const worst = Math.max(...received);
  for (const c of everyone) c.close();
  assert.ok(worst <= bound, `a member received ${worst} room.state frames for ${CROWD} changes in ${Math.round(elapsed)} ms (bound ${bound}): ${received.join(',')}`);
  // The bound above grows with a slow machine's burst; this holds whatever the speed.
  assert.ok(worst < CROWD, `received ${received.join(',')}: not fewer than one view per change`);
  const revisionsSeen = states(mod).slice(before[0]).map((s) => s.room.revision);
  assert.equal(revisionsSeen, [...revisionsSeen].sort((a, b) => a - b), 'views arrive in revision order');
});

test('a message sent after a change never overtakes the view of that change, even while that view waits its turn', async () => {
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'arena'), world.origin);
  const joined = await mod.request('room.join', { rtpCapabilities: OPUS_CAPS });
  assert.is(joined.ok, true);
  assert.ok((joined.result?.self as { seated: boolean }).seated, 'the moderator speaks');
  const listener = await MediaControlClient.connect(server.url, await mediaGrant(extraPage, 'arena', ['media:connect', 'media:join-space', 'media:request-speak']), world.origin);
  const listenerId = ((await listener.request('room.join', { rtpCapabilities: OPUS_CAPS })).result?.self as { memberId: string }).memberId;
  const send = (await mod.request('transport.create', { direction: 'send' })).result?.transportId as string;
  const produced = await mod.request('produce', { transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MIC });
  const producerId = produced.result?.producerId as string;
  assert.ok(producerId, JSON.stringify(produced.error));
  await listener.push('producer.added', (p) => p.producer.producerId === producerId);

  // Two changes in quick succession (the second view may have to wait), then a message of another kind.
  assert.is((await listener.request('hand.raise')).ok, true);
  assert.is((await mod.request('hand.dismiss', { target: listenerId })).ok, true);
  assert.is((await mod.request('producer.close', { producerId })).ok, true);
  await listener.push('producer.removed', (p) => p.producerId === producerId);
  const removedAt = listener.pushes.findIndex((p) => p.type === 'producer.removed' && p.producerId === producerId);
  const assembler = new RoomViewAssembler();
  const viewBefore = listener.pushes.slice(0, removedAt).flatMap((p) => assembler.accept(p) ?? []).at(-1);
  mod.close();
  listener.close();
  assert.ok(viewBefore, 'no view before producer.removed');
  assert.ok(!viewBefore.handQueue.includes(listenerId), 'producer.removed overtook the view of the dismissed hand');
});

test.run();
