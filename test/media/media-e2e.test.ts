import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { launchChromium, type ChromiumHandle } from '../support/chromium.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { registerEnvironment } from '../support/identity.js';
import { ALL_MEDIA_SCOPES, configureMedia, LOOPBACK_AUTHORITY_ENV, mediaGrant } from '../support/media-control.js';
import { type MediaPage, MediaPageServer } from '../support/media-page.js';
import { LONG_LEASE_ENV, runtimePerson, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * The Media plugin end to end: headless Debian Chromium with fake capture devices, the mediasoup-client test page
 * speaking our control protocol over the real server (Plugin Grants, room actors on Postgres, mediasoup workers).
 * Audio is proven by packets and decoded energy in the receiving page, never by the server's word.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let browser: ChromiumHandle;
let pages: MediaPageServer;
let world: TestEnvironment;
let authority: Server;
/** Environment owner: a moderator of every space. */
let mo: RuntimePerson;
let li: RuntimePerson;
let bo: RuntimePerson;
const runtimes = new Map<RuntimePerson, RuntimeClient>();

const space = (id: string, policy: Record<string, unknown>) => ({
  id,
  policy: { maxParticipants: 50, maxSpeakerSeats: 4, guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 20, ...policy },
});

test.before(async () => {
  authority = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ decision: 'deny', reason: 'not on the programme' })));
  await new Promise<void>((resolve) => authority.listen(0, '127.0.0.1', resolve));
  db = await createTestDatabase();
  // Each person's Runtime is opened once and kept for the later tests (runtimeOf).
  server = await startTestServer(db.url, productParts, { ...LONG_LEASE_ENV, ...LOOPBACK_AUTHORITY_ENV });
  [browser, pages] = await Promise.all([launchChromium(), MediaPageServer.start()]);
  const environmentId = 'media-e2e-world';
  const redirectUri = `${pages.origin}/callback`;
  mo = await runtimePerson(server, 'mo-owner');
  li = await runtimePerson(server, 'li-listener');
  bo = await runtimePerson(server, 'bo-caller');
  const { clientId } = await registerEnvironment(server.opsUrl, { environmentId, origin: pages.origin, ownerHandle: 'mo-owner', redirectUris: [redirectUri] });
  world = { environmentId, origin: pages.origin, clientId, redirectUri };
  await configureMedia(server.opsUrl, environmentId, {
    directCalls: { enabled: true },
    spaces: [
      space('stage', { mode: 'stage', floorControl: 'moderated', raiseHand: 'enabled', screenShare: 'speakers' }),
      space('meeting', { mode: 'meeting', maxParticipants: 8, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', screenProfile: 'motion' }),
      space('gated', { mode: 'stage', floorControl: 'moderated', raiseHand: 'enabled', screenShare: 'disabled', roleAuthorityUrl: `http://127.0.0.1:${(authority.address() as AddressInfo).port}/authority` }),
    ],
  });
});
test.after(async () => {
  await pages?.close();
  await browser?.close();
  await server?.stop('test over');
  await db?.drop();
  authority?.close();
});

/** The person's active Runtime in the world (one per person: the lease). */
async function runtimeOf(person: RuntimePerson): Promise<RuntimeClient> {
  let runtime = runtimes.get(person);
  if (!runtime) runtimes.set(person, (runtime = await (await person.runtime(world)).open()));
  return runtime;
}

const controlUrl = (): string => `${server.url.replace(/^http/, 'ws')}/v1/plugins/media/control`;

interface Participant {
  readonly page: MediaPage;
  readonly memberId: string;
}

/** A participant page of `person`, connected with a fresh grant for `scope` and joined. */
async function participant(person: RuntimePerson, scope: string, scopes: readonly string[] = ALL_MEDIA_SCOPES): Promise<Participant> {
  const page = await pages.open(browser);
  const hello = await page.api.connectControl(controlUrl(), await mediaGrant(await runtimeOf(person), scope, scopes));
  await page.api.join();
  return { page, memberId: hello.memberId };
}

/** Waits until the page has an audio (or video) consumer that received packets and, for audio, energy. */
async function hears(page: MediaPage, kind: 'audio' | 'video' = 'audio', timeoutMs = 20_000): Promise<void> {
  const started = Date.now();
  for (;;) {
    const stats = await page.api.consumerStats();
    const flowing = stats.find((s) => s.kind === kind && s.packetsReceived > 0 && (kind === 'audio' ? s.totalAudioEnergy > 0 : s.framesDecoded > 0));
    if (flowing) return;
    if (Date.now() - started > timeoutMs) assert.unreachable(`no ${kind} arrived: ${JSON.stringify(stats)} ${JSON.stringify(await page.api.consumeErrors())} ${page.errors().join('; ')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Two people in a direct call, each publishing the microphone and consuming the other, once both hear audio. */
async function directCall(caller: RuntimePerson, callee: RuntimePerson, scope: string): Promise<[Participant, Participant]> {
  const sides: [Participant, Participant] = [await participant(caller, scope), await participant(callee, scope)];
  for (const side of sides) await side.page.api.publishMicrophone();
  for (const side of sides) side.page.api.consumeAll();
  for (const side of sides) await hears(side.page);
  return sides;
}

test('a direct call: audio both ways', async () => {
  const [ann, bob] = await directCall(mo, bo, 'call:mo-bo');
  await ann.page.api.leave();
  await bob.page.api.leave();
  await Promise.all([ann.page.close(), bob.page.close()]);
});

/** The mediasoup worker processes this process spawned (the server runs in it). */
function workerPids(): number[] {
  const out = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'mediasoup-worker'], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean).map(Number);
}

test('a worker dies mid-call: both sides are told media.reset, keep their seats, publish again and hear each other', async () => {
  const [ann, bob] = await directCall(bo, li, 'call:bo-li');

  const before = workerPids();
  assert.ok(before.length > 0);
  for (const pid of before) process.kill(pid, 'SIGKILL');
  for (const side of [ann, bob]) assert.is((await side.page.nextPush('media.reset', 10_000)).reason, 'worker_lost');
  let replaced = workerPids();
  for (let waited = 0; replaced.length < before.length && waited < 10_000; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    replaced = workerPids();
  }
  assert.is(replaced.length, before.length, 'the pool is back to its size');
  assert.ok(replaced.every((pid) => !before.includes(pid)), 'with new processes');
  for (const side of [ann, bob]) {
    const state = side.page.api.roomState();
    assert.ok((await state)?.members.some((m) => m.memberId === side.memberId && m.seated), 'the seat was kept');
  }

  // What a client does on media.reset: drop its local media, then produce and consume again on fresh transports.
  for (const side of [ann, bob]) await side.page.api.resetMedia();
  await ann.page.api.publishMicrophone();
  await bob.page.api.publishMicrophone();
  await hears(ann.page);
  await hears(bob.page);
  await Promise.all([ann.page.close(), bob.page.close()]);
});

test('a stage: listeners hear the speaker; a raised hand, an offer, accepted, published and heard; a reconnect inside the grace keeps the seat', async () => {
  const host = await participant(mo, 'stage');
  const listener = await participant(li, 'stage');
  await host.page.api.publishMicrophone();
  await listener.page.api.consumeAll();
  await hears(listener.page);

  const refused = await listener.page.expectRefusal('produce', () => listener.page.api.publishMicrophone());
  assert.is(refused.code, 'not_speaker', 'a listener has no seat');
  await listener.page.api.raiseHand();
  await listener.page.api.resetMedia();
  await host.page.api.offer(listener.memberId);
  await listener.page.api.acceptOffer();
  const seated = listener.page.api.roomState();
  assert.ok((await seated)?.members.some((m) => m.memberId === listener.memberId && m.seated));
  await listener.page.api.publishMicrophone();
  host.page.api.consumeAll();
  await hears(host.page);

  // The listener's network drops; within the grace a new connection resumes the same seat.
  await listener.page.api.disconnect();
  await host.page.nextPush('room.state');
  const again = await listener.page.api.reconnect(await mediaGrant(await runtimeOf(li), 'stage'));
  assert.is(again.memberId, listener.memberId);
  await listener.page.api.resetMedia();
  const rejoined = await listener.page.api.join();
  assert.is(rejoined.resumed, true);
  assert.equal((rejoined.self as { seated: boolean }).seated, true, 'the seat was kept');
  await Promise.all([host.page.close(), listener.page.close()]);
});

test('a screen share in a meeting: the viewer decodes video frames', async () => {
  const sharer = await participant(mo, 'meeting');
  const viewer = await participant(li, 'meeting');
  const shared = await sharer.page.api.startScreenShare();
  assert.is(shared.profile, 'motion', "the space's screenProfile is the encoding hint");
  viewer.page.api.consumeAll();
  await hears(viewer.page, 'video');
  await Promise.all([sharer.page.close(), viewer.page.close()]);
});

test('the authority callback denying refuses publishing; a grant without media:publish is refused', async () => {
  const gated = await participant(mo, 'gated');
  const denied = await gated.page.expectRefusal('produce', () => gated.page.api.publishMicrophone());
  assert.is(denied.code, 'publisher_denied');
  await gated.page.close();

  const withoutPublish = await participant(mo, 'meeting', ['media:connect', 'media:join-space', 'media:request-speak']);
  const refused = await withoutPublish.page.expectRefusal('produce', () => withoutPublish.page.api.publishMicrophone());
  assert.is(refused.code, 'scope_missing');
  await withoutPublish.page.close();
});

test.run();
