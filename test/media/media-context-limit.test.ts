import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MEDIA_LIMITS } from '../../media/control/media-control.messages.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { configureMedia, FULL_MEETING, FULL_STAGE, mediaGrant, MediaControlClient, MEDIA_TEST_ENV, type MediaCodecName } from '../support/media-control.js';
import { crowdPages, inParallel, runtimePerson, type TestEnvironment, testEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * maxParticipantsPerContext (150): connections per room, counted at the upgrade, over real sockets of 151 distinct
 * people (one connection per person is its own limit, so a crowd needs that many accounts). Enrolment start is
 * limited per client address, so the crowd enrols from several loopback source addresses.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let world: TestEnvironment;
const crowd: RuntimeClient[] = [];
const connections: MediaControlClient[] = [];

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, MEDIA_TEST_ENV);
  await runtimePerson(server, 'crowd-owner');
  world = await testEnvironment(server.opsUrl, 'media-crowd', 'crowd-owner');
  await configureMedia(server.opsUrl, world.environmentId, { directCalls: { enabled: false }, spaces: [{ id: 'plaza', policy: FULL_MEETING }, { id: 'annex', policy: FULL_MEETING }, { id: 'arena', policy: FULL_STAGE }] });
  const people = MEDIA_LIMITS.maxParticipantsPerContext + 1;
  crowd.push(...(await crowdPages(server, world, 'crowd', people)));
});
test.after(async () => {
  for (const connection of connections) connection.close();
  await server.stop('test over');
  await db.drop();
});

type Refusal = { status: number; code: string };

/** A connection of `page`'s person to `scope`'s room, or the upgrade's refusal. */
async function connect(page: RuntimeClient, scope: string, codec: MediaCodecName = 'json'): Promise<MediaControlClient | Refusal> {
  try {
    const connection = await MediaControlClient.connect(server.url, await mediaGrant(page, scope), world.origin, codec);
    connections.push(connection);
    return connection;
  } catch (error) {
    const refused = error as { status?: number; body?: string };
    if (refused.status === undefined) throw error;
    return { status: refused.status, code: (JSON.parse(refused.body ?? '{}') as { code: string }).code };
  }
}

const admitted = (outcome: MediaControlClient | Refusal): MediaControlClient => {
  if (!(outcome instanceof MediaControlClient)) return assert.unreachable(`refused: ${JSON.stringify(outcome)}`) as never;
  return outcome;
};
const full: Refusal = { status: 429, code: 'media_context_full' };

test('150 people connect to one context; the 151st is refused 429 media_context_full, and admitted once someone leaves', async () => {
  const limit = MEDIA_LIMITS.maxParticipantsPerContext;
  assert.is(limit, 150);
  const inPlaza: MediaControlClient[] = [];
  await inParallel(limit, 8, async (i) => {
    inPlaza[i] = admitted(await connect(crowd[i]!, 'plaza'));
  });
  const last = crowd[limit]!;
  assert.equal(await connect(last, 'plaza'), full);

  // The limit is per context: another room of the same Environment still admits the same person.
  admitted(await connect(last, 'annex'));

  // A member reconnecting replaces their own connection: a full room does not lock its members out.
  admitted(await connect(crowd[0]!, 'plaza'));
  assert.is(await inPlaza[0]!.closed, 4409);
  assert.equal(await connect(last, 'plaza'), full, 'still full after the replacement');

  // Someone leaves: the place frees up (the server sees the close a moment after the client does).
  inPlaza[1]!.close();
  await inPlaza[1]!.closed;
  let outcome = await connect(last, 'plaza');
  for (let attempt = 0; attempt < 50 && !(outcome instanceof MediaControlClient); attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    outcome = await connect(last, 'plaza');
  }
  admitted(outcome);
});

test('a full stage, half over msgpack: no frame exceeds maxMessageBytes, and every member assembles the same whole view', async () => {
  const limit = MEDIA_LIMITS.maxParticipantsPerContext;
  const members: MediaControlClient[] = [];
  // Each person's connection to `arena` replaces the one they had (one connection per person).
  await inParallel(limit, 8, async (i) => {
    const member = admitted(await connect(crowd[i]!, 'arena', i % 2 === 0 ? 'json' : 'msgpack'));
    members[i] = member;
    const joined = await member.request('room.join', { rtpCapabilities: {} });
    assert.ok(joined.ok, JSON.stringify(joined.error));
  });
  const complete = (member: MediaControlClient): boolean => member.room()?.members.length === limit;
  for (let waited = 0; waited < 10_000 && !members.every(complete); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.ok(members.every((m) => m.pushes.some((p) => p.type === 'room.state.members')), 'the view of 150 members came in pages');
  const closedEarly = members.flatMap((m, i) => (m.closeCode === undefined ? [] : [`${i}: ${m.closeCode}`]));
  assert.equal(closedEarly, [], 'a client with a 16 KiB maximum message size was cut off');
  const largest = Math.max(...members.flatMap((m) => m.frameBytes));
  assert.ok(largest <= MEDIA_LIMITS.maxMessageBytes, `a frame of ${largest} bytes`);
  const finals = members.map((m) => m.room());
  assert.is(finals[0]?.members.length, limit);
  for (const [i, view] of finals.entries()) assert.equal(view, finals[0], `member ${i} (${members[i]!.codec}) holds another view`);
});

test.run();
