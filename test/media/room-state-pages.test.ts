import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  DISPLAY_NAME_MAX_LENGTH,
  MEDIA_LIMITS,
  MediaV2ServerMessageSchema,
  roomView,
  RoomViewAssembler,
  type MemberView,
  type RoomHeader,
  type RoomView,
} from '../../media/control/media-control.messages.js';
import { roomStateMessages, type RoomStateMessage } from '../../media/control/room-state-pages.js';
import { jsonCodec, msgpackCodec } from '../../transport/ws/codecs.js';

/**
 * A room view in pages (`room.state`, then `room.state.members`), each within maxMessageBytes in both codecs whatever
 * the members' ids and names, and the client side that puts them back together: whole views only, newest revision only.
 */
const LIMIT = MEDIA_LIMITS.maxMessageBytes;
const ISO = '2026-03-01T10:00:00.000Z';

const header = (revision: number): RoomHeader => ({
  roomId: `env_${'a'.repeat(26)}.arena`,
  scope: 'arena',
  revision,
  mode: 'stage',
  policy: { maxParticipants: 150, maxSpeakerSeats: 16, floorControl: 'moderated', raiseHand: 'enabled', screenShare: 'speakers', screenProfile: 'slides', encryption: 'transport', reconnectGraceSeconds: 30 },
  screenSharer: null,
});

/** The largest member entry the schema allows: 64-character ids and a 128-character name, all of 4-byte characters. */
function widestMember(i: number): MemberView {
  const id = `${String(i).padStart(3, '0')}${'😀'.repeat(30)}${'x'}`;
  return {
    memberId: id,
    displayName: '😀'.repeat(DISPLAY_NAME_MAX_LENGTH / 2),
    role: 'listener',
    seated: false,
    connection: 'dropped',
    graceUntil: ISO,
    handRaisedAt: ISO,
    handPosition: 150 - i,
    offer: { by: id, expiresAt: ISO },
  };
}

const ordinaryMember = (i: number): MemberView => ({
  memberId: `act_${String(i).padStart(26, 'q')}`,
  displayName: `Member ${String(i).padStart(6, '0')}`,
  role: 'listener',
  seated: false,
  connection: 'connected',
  graceUntil: null,
  handRaisedAt: i % 2 ? ISO : null,
  handPosition: i % 2 ? (i + 1) / 2 : null,
  offer: null,
});

const bytes = (message: unknown) => ({
  json: Buffer.byteLength(jsonCodec.encode(message) as string),
  msgpack: (msgpackCodec.encode(message) as Uint8Array).byteLength,
});

function assemble(messages: readonly RoomStateMessage[]): RoomView | null {
  const assembler = new RoomViewAssembler();
  let last: RoomView | null = null;
  for (const m of messages) last = assembler.accept(m) ?? last;
  return last;
}

for (const [name, make] of [['ordinary', ordinaryMember], ['widest the schema allows', widestMember]] as const) {
  test(`150 ${name} members: every page fits ${LIMIT} bytes in JSON and msgpack, is valid, and the pages give back the view`, () => {
    const view = roomView(header(7), Array.from({ length: 150 }, (_, i) => make(i)));
    const messages = roomStateMessages(view, LIMIT);
    assert.ok(messages.length > 1, 'one page');
    for (const m of messages) {
      const size = bytes(m);
      assert.ok(size.json <= LIMIT && size.msgpack <= LIMIT, `${m.type}: ${JSON.stringify(size)}`);
      MediaV2ServerMessageSchema.parse(m);
    }
    assert.equal(messages.map((m) => m.type), ['room.state', ...messages.slice(1).map(() => 'room.state.members')]);
    assert.equal(assemble(messages), view);
  });
}

test('an empty room and a small one are one page; the queue and the offers are read off the members', () => {
  const empty = roomView(header(1), []);
  assert.equal(roomStateMessages(empty, LIMIT), [{ type: 'room.state', room: header(1), membersTotal: 0, pages: 1, members: [] }]);
  assert.equal(assemble(roomStateMessages(empty, LIMIT)), empty);
  const members = [ordinaryMember(3), ordinaryMember(1), { ...ordinaryMember(2), offer: { by: 'act_mod', expiresAt: ISO } }];
  const view = roomView(header(2), members);
  assert.equal(view.handQueue, [members[1]!.memberId, members[0]!.memberId], 'by position, not member order');
  assert.equal(view.offers, [{ target: members[2]!.memberId, by: 'act_mod', expiresAt: ISO }]);
  assert.is(roomStateMessages(view, LIMIT).length, 1);
});

test('a smaller limit makes more pages, each within it', () => {
  const view = roomView(header(3), Array.from({ length: 40 }, (_, i) => ordinaryMember(i)));
  const messages = roomStateMessages(view, 2_048);
  assert.ok(messages.length >= 4);
  for (const m of messages) assert.ok(Math.max(bytes(m).json, bytes(m).msgpack) <= 2_048);
  assert.equal(assemble(messages), view);
});

const pagesOf = (revision: number, count = 60) => roomStateMessages(roomView(header(revision), Array.from({ length: count }, (_, i) => ordinaryMember(i))), 4_096);

test('assembler: a view applies only once its last page is in, and pages of another revision are ignored', () => {
  const [first, second, ...rest] = pagesOf(5);
  const stranger = pagesOf(4)[1]!;
  const assembler = new RoomViewAssembler();
  assert.is(assembler.accept(first!), null);
  assert.is(assembler.accept(stranger), null, 'a page of revision 4 is not part of 5');
  assert.is(assembler.accept(second!), null);
  let done: RoomView | null = null;
  for (const page of rest) done = assembler.accept(page);
  assert.is(done?.revision, 5);
  assert.is(done?.members.length, 60);
  assert.is(assembler.view, done);
  assert.is(assembler.accept({ type: 'ping' } as never), null);
});

test('assembler: a newer room.state abandons an unfinished view; an older or equal one is ignored once a newer is held', () => {
  const older = pagesOf(5);
  const newer = pagesOf(6);
  const assembler = new RoomViewAssembler();
  assembler.accept(older[0]!);
  for (const page of newer) assembler.accept(page);
  assert.is(assembler.view?.revision, 6);
  for (const page of older.slice(1)) assert.is(assembler.accept(page), null, 'the rest of revision 5 arrives late');
  for (const page of older) assert.is(assembler.accept(page), null, 'a whole older view');
  assert.is(assembler.view?.revision, 6);
});

test('assembler: a page out of order or a member count that does not add up is never applied; the next view is', () => {
  const [first, second, third] = pagesOf(8);
  const skipping = new RoomViewAssembler();
  skipping.accept(first!);
  assert.is(skipping.accept(third!), null);
  assert.is(skipping.accept(second!), null, 'the view was abandoned');
  assert.is(skipping.view, null);
  const short = new RoomViewAssembler();
  const pages = pagesOf(9);
  const lying = { ...(pages[0] as Extract<RoomStateMessage, { type: 'room.state' }>), membersTotal: 61 };
  let applied: RoomView | null = null;
  for (const page of [lying, ...pages.slice(1)]) applied = short.accept(page) ?? applied;
  assert.is(applied, null);
  for (const page of pagesOf(10)) applied = short.accept(page) ?? applied;
  assert.is(applied?.revision, 10);
});

test.run();
