import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MEDIA_ROOM_KIND, mediaRoomKey } from '../../actors/media.actors.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { DIRECT_CALLS_PER_PERSON } from '../../media/control/media-rooms.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { configureMedia, mediaGrant, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';
import { DEFAULT_DIRECT_CALL_POLICY } from '../../media/media.feature.js';

/**
 * DIRECT_CALLS_PER_PERSON: call names are the Environment's to choose, so the calls one person is in at once (connected,
 * or dropped inside the reconnect grace) are bounded; a call over it is refused before its room actor or router exists.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
const clock = new ManualClock(Date.now());
let world: TestEnvironment;
let calPage: RuntimeClient;
let liaPage: RuntimeClient;
const connections: MediaControlClient[] = [];
const GRACE_S = 30;

test.before(async () => {
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, MEDIA_TEST_ENV, clock);
  const cal = await runtimePerson(server, 'caller-cal');
  const lia = await runtimePerson(server, 'listener-lia');
  world = await testEnvironment(server.opsUrl, 'media-calls', 'caller-cal');
  const directCall = { ...DEFAULT_DIRECT_CALL_POLICY, reconnectGraceSeconds: GRACE_S };
  await configureMedia(server.opsUrl, world.environmentId, { directCalls: { enabled: true, policy: directCall } });
  calPage = await (await cal.runtime(world)).open();
  liaPage = await (await lia.runtime(world)).open();
});
test.after(async () => {
  for (const connection of connections) connection.close();
  await server.stop('test over');
  await db.drop();
});

/** `page`'s person connects to `scope` (replacing their connection elsewhere, whose member is dropped) and joins. */
async function join(page: RuntimeClient, scope: string): Promise<{ ok: boolean; code: string | undefined; resumed: unknown; connection: MediaControlClient }> {
  const connection = await MediaControlClient.connect(server.url, await mediaGrant(page, scope), world.origin);
  connections.push(connection);
  const answer = await connection.request('room.join', { rtpCapabilities: {} });
  return { ok: answer.ok, code: answer.error?.code, resumed: answer.result?.resumed, connection };
}

const roomExists = async (scope: string): Promise<boolean> =>
  (await server.services.host.readCommitted(MEDIA_ROOM_KIND, mediaRoomKey(world.environmentId, scope))) !== undefined;

test('a person is in at most DIRECT_CALLS_PER_PERSON calls at once; a place comes back on leave or at the end of the grace', async () => {
  assert.is(DIRECT_CALLS_PER_PERSON, 4);
  // Four calls, each connection replacing the one before: the earlier calls keep the member, dropped, for its grace.
  for (const name of ['a', 'b', 'c', 'd']) {
    const joined = await join(calPage, `call:${name}`);
    assert.ok(joined.ok, `call:${name}: ${joined.code}`);
  }
  const over = await join(calPage, 'call:e');
  assert.equal([over.ok, over.code], [false, 'direct_call_limit']);
  assert.is(await roomExists('call:e'), false, 'refused before the room actor (and its router) existed');

  // Per person: someone else still calls.
  assert.ok((await join(liaPage, 'call:z')).ok);

  // Back into a call the person is still in (its grace runs) takes no new place; leaving it gives its place back.
  const back = await join(calPage, 'call:a');
  assert.equal([back.ok, back.resumed], [true, true]);
  assert.ok((await back.connection.request('room.leave')).ok);
  assert.ok((await join(calPage, 'call:e')).ok, 'the place of the call left');
  assert.equal((await join(calPage, 'call:f')).code, 'direct_call_limit');

  // The grace of the calls dropped without leaving ends: they are left, and their places come back.
  clock.advance(GRACE_S * 1000 + 1);
  const freed = await waitFor(async () => {
    const attempt = await join(calPage, 'call:f');
    return attempt.ok ? attempt : undefined;
  }, 'a place to come back when the grace ended');
  assert.ok(freed.ok);
});

test.run();
