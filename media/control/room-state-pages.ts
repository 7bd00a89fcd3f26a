import { DEFAULT_CODECS, type WsCodec } from '../../transport/ws/codecs.js';
import type { MediaV2ServerMessage, MemberView, RoomHeader, RoomView } from './media-control.messages.js';

export type RoomStateMessage = Extract<MediaV2ServerMessage, { type: 'room.state' | 'room.state.members' }>;

/** Bytes of `message` in the largest of the codecs a connection may use: a page must fit in every one. */
export function encodedBytes(message: unknown, codecs: readonly WsCodec[] = DEFAULT_CODECS): number {
  let largest = 0;
  for (const codec of codecs) {
    const frame = codec.encode(message);
    largest = Math.max(largest, typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength);
  }
  return largest;
}

/**
 * Slack for the encoding of the members array itself beyond its empty form: msgpack writes a 1-byte header up to 15
 * elements and a 3-byte one up to 65535 (JSON's commas are counted with each member).
 */
const ARRAY_HEADER_SLACK = 2;
/** Stands for `pages` and `page` while the envelope is measured: a view never has more pages than members. */
const PAGE_NUMBER_PLACEHOLDER = 999_999;

/**
 * A room view as the messages that carry it, each within `maxBytes` in every codec: `room.state` (the header, the
 * member count and as many members as fit), then `room.state.members` pages with the rest, in member order. Members
 * are packed by their measured size, so a page holds as many as fit whatever their ids and names; one member never
 * comes near a page (its id and name are bounded), but would get a page of its own rather than be cut.
 */
export function roomStateMessages(view: RoomView, maxBytes: number): RoomStateMessage[] {
  const { members, handQueue: _handQueue, offers: _offers, ...header } = view;
  const room: RoomHeader = header;
  const first = maxBytes - encodedBytes({ type: 'room.state', room, membersTotal: members.length, pages: PAGE_NUMBER_PLACEHOLDER, members: [] }) - ARRAY_HEADER_SLACK;
  const rest = maxBytes - encodedBytes({ type: 'room.state.members', revision: room.revision, page: PAGE_NUMBER_PLACEHOLDER, pages: PAGE_NUMBER_PLACEHOLDER, members: [] }) - ARRAY_HEADER_SLACK;
  const pages: MemberView[][] = [[]];
  let budget = first;
  for (const member of members) {
    // JSON adds a comma before every member but the first; msgpack adds nothing beyond the array header.
    const cost = encodedBytes(member) + 1;
    const page = pages[pages.length - 1]!;
    if (cost > budget && page.length > 0) {
      pages.push([member]);
      budget = rest - cost;
    } else {
      page.push(member);
      budget -= cost;
    }
  }
  const total = pages.length;
  return pages.map((page, i): RoomStateMessage =>
    i === 0
      ? { type: 'room.state', room, membersTotal: members.length, pages: total, members: page }
      : { type: 'room.state.members', revision: room.revision, page: i + 1, pages: total, members: page },
  );
}
