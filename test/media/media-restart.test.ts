import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { identityFeature } from '../../identity/identity.feature.js';
import { mediaControlAsyncApiText, mediaFeature } from '../../media/media.feature.js';
import { mediaCatalogFeature } from '../../plugins/media/media-catalog.feature.js';
import { pluginsFeature } from '../../plugins/plugins.feature.js';
import { runtimeFeature } from '../../runtime/runtime.feature.js';
import { productParts } from '../../server/main.js';
import { combineParts, type ServerParts } from '../../server/server.js';
import type { RoomView } from '../../media/control/media-control.messages.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { configureMedia, mediaGrant, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';
import { spawnServer } from '../support/process.js';

/**
 * The Media feature across a server stop (graceful, or a killed process) and a new start on the same database.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>> | undefined;

const policy = { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 };

/** The product's parts, built afresh (what a new process would have). */
const freshProductParts = (): ServerParts =>
  combineParts(identityFeature, runtimeFeature(), pluginsFeature, mediaFeature(), mediaCatalogFeature({ mediaV2DataPlaneAsyncApi: mediaControlAsyncApiText }));

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await server?.stop('test over');
  await db.drop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A person (new on this server) joins `space`; the answer of room.join, or the pushes when none came. */
/** A new person's `room.join`: its answer, and the room view that came before it. */
async function joinAs(handle: string, world: TestEnvironment, space: string): Promise<{ ok: boolean; result?: Record<string, unknown>; error?: unknown; pushes?: unknown; room?: RoomView | undefined }> {
  const person = await runtimePerson(server!, handle);
  const page = await (await person.runtime(world)).open();
  const conn = await MediaControlClient.connect(server!.url, await mediaGrant(page, space), world.origin);
  try {
    return { ...(await conn.request('room.join', { rtpCapabilities: {} })), room: conn.room() };
  } catch {
    return { ok: false, pushes: conn.pushes.filter((p) => p.type !== 'hello') };
  } finally {
    conn.close();
  }
}

test('a server started again in the same process from productParts hosts media (its worker pool is not the stopped one)', async () => {
  server = await startTestServer(db.url, productParts, MEDIA_TEST_ENV);
  await runtimePerson(server, 'owner-one');
  const world = await testEnvironment(server.opsUrl, 'media-again', 'owner-one');
  await configureMedia(server.opsUrl, world.environmentId, { directCalls: { enabled: false }, spaces: [{ id: 'hall', policy }] });
  assert.is((await joinAs('first-fay', world, 'hall')).ok, true);
  await server.stop('restart');
  server = await startTestServer(db.url, productParts, MEDIA_TEST_ENV);
  const again = await joinAs('second-sam', world, 'hall');
  await server.stop('done');
  server = undefined;
  assert.is(again.ok, true, `room.join after the restart: ${JSON.stringify(again)}`);
});

test('members connected at a graceful stop are dropped, and removed when their grace ends after the restart', async () => {
  server = await startTestServer(db.url, freshProductParts(), MEDIA_TEST_ENV);
  await runtimePerson(server, 'moderator-mo');
  const lia = await runtimePerson(server, 'listener-lia');
  const world = await testEnvironment(server.opsUrl, 'media-restart', 'moderator-mo');
  await configureMedia(server.opsUrl, world.environmentId, { directCalls: { enabled: false }, spaces: [{ id: 'hall', policy }] });
  const liaPage = await (await lia.runtime(world)).open();
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'hall'), world.origin);
  const joined = await conn.request('room.join', { rtpCapabilities: {} });
  assert.is(joined.ok, true);
  const liaId = (joined.result?.self as { memberId: string }).memberId;

  await server.stop('restart');
  const stoppedAt = Date.now();
  server = await startTestServer(db.url, freshProductParts(), MEDIA_TEST_ENV);
  await sleep(Math.max(0, stoppedAt + 7_000 - Date.now()));

  const view = await joinAs('watcher-wim', world, 'hall');
  await server.stop('done');
  server = undefined;
  assert.is(view.ok, true, JSON.stringify(view));
  const ghost = view.room!.members.find((m) => m.memberId === liaId);
  assert.equal(ghost, undefined, `7 s after the stop (grace 5 s) the member is still in the room: ${JSON.stringify(ghost)}`);
});

test('members connected when the server process is killed get their grace after the restart, then leave', async () => {
  // A short hosting TTL (renewed every second) so the lapse falls well inside the test; the default is 60 s.
  const env = { DATABASE_URL: db.url, MEDIA_WORKERS: '1', MEDIA_HOSTING_TTL_SECONDS: '3' };
  const first = await spawnServer('dist/server/main.js', env);
  let second: Awaited<ReturnType<typeof spawnServer>> | undefined;
  try {
    await runtimePerson(first, 'owner-olga');
    const lia = await runtimePerson(first, 'listener-lou');
    const world = await testEnvironment(first.opsUrl, 'media-crash', 'owner-olga');
    await configureMedia(first.opsUrl, world.environmentId, { directCalls: { enabled: false }, spaces: [{ id: 'hall', policy }] });
    const page = await (await lia.runtime(world)).open();
    const conn = await MediaControlClient.connect(first.url, await mediaGrant(page, 'hall'), world.origin);
    const joined = await conn.request('room.join', { rtpCapabilities: {} });
    assert.is(joined.ok, true);
    const liaId = (joined.result?.self as { memberId: string }).memberId;
    first.child.kill('SIGKILL');
    await first.exited;
    const killedAt = Date.now();
    second = await spawnServer('dist/server/main.js', env);
    // Hosting lapses by 3 s after the kill, then the 5 s grace: gone by 8 s (plus a poll), whoever opens the room.
    await sleep(Math.max(0, killedAt + 11_000 - Date.now()));
    const watcher = await runtimePerson(second, 'watcher-wanda');
    const wpage = await (await watcher.runtime(world)).open();
    const wconn = await MediaControlClient.connect(second.url, await mediaGrant(wpage, 'hall'), world.origin);
    const view = await wconn.request('room.join', { rtpCapabilities: {} });
    wconn.close();
    assert.is(view.ok, true, JSON.stringify(view));
    // The view of the join came before its answer.
    const ghost = wconn.room()!.members.find((m) => m.memberId === liaId);
    assert.equal(ghost, undefined, `11 s after the crash (hosting 3 s, grace 5 s) the member is still in the room: ${JSON.stringify(ghost)}`);
  } finally {
    first.child.kill('SIGKILL');
    second?.child.kill('SIGTERM');
    await second?.exited;
  }
});

test.run();
