import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { PRESENCE_PAGE_SIZE, RUNTIME_MAX_OUTBOUND_BYTES, RuntimeServerMessage } from '../../runtime/runtime-socket.messages.js';
import { productParts } from '../../server/main.js';
import { jsonCodec, msgpackCodec } from '../../transport/ws/codecs.js';
import { crowdPages, inParallel, LONG_LEASE_ENV, runtimePerson, type TestEnvironment, testEnvironment } from '../support/runtime.js';
import { runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * `presence.list` in pages, through the real server and real sockets: a crowd larger than one page is listed a page at
 * a time (`after` → `next`), each message within the runtime socket's outbound bound, and a walk stays exact while
 * people come and go. The protocol's numbers are written out here, as a client would hold to them.
 */
const PAGE = 100;
const MAX_FRAME = 16 * 1024;
/** Enough that one snapshot of everyone would be over MAX_FRAME (about 100 bytes a member in JSON), and two pages. */
const CROWD = 180;

let server: TestServer;
let world: TestEnvironment;
let pages: RuntimeClient[] = [];
/** Each crowd member's open runtime socket, by crowd index; the asker is index 0. */
const sockets: Socket[] = [];
/** Crowd index by actor id, from each socket's `ready`. */
const indexOf = new Map<string, number>();

withTestServer(test, (started) => ({ server } = started), productParts, LONG_LEASE_ENV);
test.before(async () => {
  await runtimePerson(server, 'plaza-owner');
  world = await testEnvironment(server.opsUrl, 'presence-plaza', 'plaza-owner');
  pages = await crowdPages(server, world, 'plaza', CROWD);
  await inParallel(CROWD, 8, async (i) => {
    sockets[i] = await open(i);
  });
});

async function open(i: number): Promise<Socket> {
  const socket = await runtimeSocket(pages[i]!, undefined, undefined, MAX_FRAME);
  indexOf.set(String((await socket.next('ready')).actorId), i);
  return socket;
}

interface Snapshot {
  type: string;
  members: Array<{ actorId: string; state: string; since: string }>;
  total?: number;
  next?: string;
  ref?: string;
}

let asked = 0;
/** One `presence.list` and its answer (a snapshot, or an error: those carry no ref), checked to be within the bound. */
async function list(socket: Socket, fields: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const ref = `l${++asked}`;
  const from = socket.messages.length;
  socket.send({ type: 'presence.list', ref, ...fields });
  let closed: { code: number } | undefined;
  void socket.closed.then((c) => (closed = c));
  const at = await waitFor(() => {
    if (closed) throw new Error(`the asker's socket closed ${closed.code} waiting for ${ref}`);
    const i = socket.messages.slice(from).findIndex((m) => m.ref === ref || m.type === 'error');
    return i < 0 ? undefined : from + i;
  }, `the answer to ${ref}`);
  const bytes = socket.frameBytes[at]!;
  assert.ok(bytes <= MAX_FRAME, `${ref}: ${bytes} bytes, over ${MAX_FRAME}`);
  // What the server sent is what the AsyncAPI document says it sends (the form its size bound rests on).
  RuntimeServerMessage.parse(socket.messages[at]);
  return socket.messages[at]!;
}

/** Every page from `after` on: the pages and their members, in order. */
async function walk(socket: Socket, first?: Snapshot): Promise<Snapshot[]> {
  const out: Snapshot[] = first ? [first] : [(await list(socket)) as unknown as Snapshot];
  while (out.at(-1)!.next !== undefined) {
    assert.ok(out.length <= CROWD, 'a walk ends');
    out.push((await list(socket, { after: out.at(-1)!.next })) as unknown as Snapshot);
  }
  return out;
}

/** The asker's socket (crowd member 0), opened afresh: one a test broke does not fail the next. */
async function asker(): Promise<Socket> {
  const old = sockets[0];
  if (old && old.ws.readyState === old.ws.OPEN) return old;
  return (sockets[0] = await open(0));
}

const actorsOf = (snapshots: Snapshot[]): string[] => snapshots.flatMap((s) => s.members.map((m) => m.actorId));

test('an Environment with more people than a page: pages of at most 100 cover everyone exactly once, each within 16 KiB', async () => {
  const snapshots = await walk(await asker());
  assert.is(snapshots.length, Math.ceil(CROWD / PAGE));
  for (const [i, s] of snapshots.entries()) {
    assert.is(s.type, 'presence.snapshot');
    assert.is(s.members.length, i < snapshots.length - 1 ? PAGE : CROWD - PAGE * i, `page ${i + 1} is full unless last`);
    assert.is(s.total, CROWD, 'total: everyone present when the page was made');
    assert.is(typeof s.ref, 'string', 'each page answers its own request');
  }
  const actors = actorsOf(snapshots);
  assert.is(new Set(actors).size, actors.length, 'nobody twice');
  assert.equal([...actors].sort(), [...indexOf.keys()].sort(), 'everyone present');
  // A stable order: a second walk with nothing changed is the same, page by page.
  const again = await walk(await asker());
  assert.equal(again.map((s) => s.members), snapshots.map((s) => s.members));
  assert.equal(again.map((s) => s.next), snapshots.map((s) => s.next));
});

test('a walk while people leave, rejoin and reconnect: everyone present throughout appears exactly once', async () => {
  const by = await asker();
  const first = (await list(by)) as unknown as Snapshot;
  const seen = first.members.map((m) => m.actorId);
  const unseen = [...indexOf.keys()].filter((a) => !seen.includes(a));
  const gone: string[] = [];
  const leave = async (actorId: string): Promise<void> => {
    const socket = sockets[indexOf.get(actorId)!]!;
    socket.ws.close();
    await socket.closed;
  };
  // The member the cursor names leaves: the walk goes on after its place all the same.
  const cursorMember = seen.at(-1)!;
  await leave(cursorMember);
  gone.push(cursorMember);
  // A member already listed leaves and comes back: a join during the walk, which it may list again (at the end).
  const rejoined = seen[PAGE / 2]!;
  await leave(rejoined);
  sockets[indexOf.get(rejoined)!] = await open(indexOf.get(rejoined)!);
  // A member not listed yet leaves for good; another's page reconnects: a leave and a join, so it is listed once, later on.
  const leaver = unseen[3]!;
  await leave(leaver);
  gone.push(leaver);
  const reconnected = unseen[7]!;
  const old = sockets[indexOf.get(reconnected)!]!;
  sockets[indexOf.get(reconnected)!] = await open(indexOf.get(reconnected)!);
  assert.is((await old.closed).code, 4411);

  const rest = await walk(by, (await list(by, { after: first.next })) as unknown as Snapshot);
  const later = actorsOf(rest);
  assert.is(new Set(later).size, later.length, 'nobody twice');
  assert.equal(later.filter((a) => seen.includes(a)), later.includes(rejoined) ? [rejoined] : [], 'of the first page, only one who joined again during the walk');
  assert.equal(later.filter((a) => unseen.includes(a)).sort(), unseen.filter((a) => a !== leaver).sort(), 'everyone not yet listed who stayed, the reconnected one too');
  assert.ok(!later.includes(leaver) && !later.includes(cursorMember), 'nobody who had left');
  assert.is(rest.at(-1)!.total, CROWD - gone.length);

  for (const actorId of gone) sockets[indexOf.get(actorId)!] = await open(indexOf.get(actorId)!);
  assert.is(((await list(by)) as unknown as Snapshot).total, CROWD);
});

test('a bad cursor is refused validation_failed at /after; a cursor past everyone is an empty last page', async () => {
  const by = await asker();
  for (const after of ['', 'x', '0', '012', '-1', '1.5', '99999999999999999', 5, null]) {
    const refused = await list(by, { after });
    assert.is(refused.type, 'error', `after ${JSON.stringify(after)}`);
    assert.is(refused.code, 'validation_failed');
    assert.equal((refused.details as Array<{ pointer: string }>).map((d) => d.pointer), ['/after'], `after ${JSON.stringify(after)}`);
  }
  const past = (await list(by, { after: '9999999999999999' })) as unknown as Snapshot;
  assert.equal({ ...past, ref: undefined }, { type: 'presence.snapshot', members: [], total: CROWD, ref: undefined });
  assert.is(by.ws.readyState, by.ws.OPEN, 'refusals leave the socket open');
});

test('an Environment with few people is answered in one page as before, with its total and no next', async () => {
  const hall = await testEnvironment(server.opsUrl, 'presence-hall', 'plaza-owner');
  // From an address of their own: the crowd's enrolments spent those of crowdPages.
  const few = await Promise.all(['hall-a', 'hall-b'].map(async (handle) => (await (await runtimePerson(server, handle, hall, '127.0.0.99')).runtime()).open()));
  const [a, b] = await Promise.all(few.map((page) => runtimeSocket(page, undefined, undefined, MAX_FRAME)));
  const ids = await Promise.all([a!, b!].map(async (s) => String((await s.next('ready')).actorId)));
  const only = (await list(a!)) as unknown as Snapshot;
  assert.equal(Object.keys(only).sort(), ['members', 'ref', 'total', 'type']);
  assert.is(only.total, 2);
  assert.equal(only.members.map((m) => m.actorId).sort(), [...ids].sort());
  for (const m of only.members) assert.equal(Object.keys(m), ['actorId', 'state', 'since']);
  a!.ws.close();
  b!.ws.close();
});

test('the largest presence.snapshot the schema admits fits the outbound bound in both codecs', () => {
  assert.is(PRESENCE_PAGE_SIZE, PAGE);
  assert.is(RUNTIME_MAX_OUTBOUND_BYTES, MAX_FRAME);
  const member = { actorId: `act_${'z'.repeat(26)}`, state: 'available', since: new Date(Date.UTC(9999, 11, 31, 23, 59, 59, 999)).toISOString() };
  // A ref of control characters is six bytes a character in JSON; one of U+FFFD three in msgpack's UTF-8.
  for (const ref of ['\u0001'.repeat(64), '\ufffd'.repeat(64)]) {
    const largest = RuntimeServerMessage.parse({ type: 'presence.snapshot', members: Array.from({ length: PAGE }, () => member), total: Number.MAX_SAFE_INTEGER, next: '9'.repeat(16), ref });
    for (const codec of [jsonCodec, msgpackCodec]) {
      const frame = codec.encode(largest);
      const bytes = typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength;
      assert.ok(bytes <= MAX_FRAME * 0.7, `${codec.subprotocol}: ${bytes} bytes, not well within ${MAX_FRAME}`);
    }
  }
  assert.throws(() => RuntimeServerMessage.parse({ type: 'presence.snapshot', members: Array.from({ length: PAGE + 1 }, () => member), total: PAGE + 1 }));
});

test.after(() => {
  for (const socket of sockets) socket?.ws.close();
});

test.run();
