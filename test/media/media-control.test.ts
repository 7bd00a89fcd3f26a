import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { DiagnosticSeverity, Parser } from '@asyncapi/parser';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MediaV2ClientMessageSchema, MediaV2ServerMessageSchema } from '../../media/control/media-control.messages.js';
import { productParts } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { FULL_STAGE, LOOPBACK_AUTHORITY_ENV, mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';

/**
 * The Media control plane over real WebSockets against the real server (Postgres, room actors, mediasoup workers):
 * each refusal at the upgrade, the limits (requestsPerMinute per person, across reconnects), one connection per person, the end of the grant's fence, then a stage's
 * floor control and the publisher-authority callback. Real audio in Chromium is test/media/media-e2e.test.ts.
 */
let db: TestDatabase;
let server: Awaited<ReturnType<typeof startTestServer>>;
let lia: RuntimePerson;
let world: TestEnvironment;
let modPage: RuntimeClient;
let liaPage: RuntimeClient;
let authority: Server;
let authorityAnswer: { status: number; body: string } = { status: 200, body: JSON.stringify({ decision: 'deny', reason: 'not on the programme' }) };
const authorityBodies: Array<Record<string, unknown>> = [];
/** Well-formed RTP parameters of a microphone (what mediasoup-client would send), for tests about something else. */
const MICROPHONE_RTP = { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }] };

const stagePolicy = (roleAuthorityUrl?: string) => ({ ...FULL_STAGE, ...(roleAuthorityUrl ? { roleAuthorityUrl } : {}) });

test.before(async () => {
  authority = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      authorityBodies.push(JSON.parse(body) as Record<string, unknown>);
      res.writeHead(authorityAnswer.status, { 'content-type': 'application/json' }).end(authorityAnswer.body);
    });
  });
  await new Promise<void>((resolve) => authority.listen(0, '127.0.0.1', resolve));
  const authorityUrl = `http://127.0.0.1:${(authority.address() as AddressInfo).port}/media/authority`;
  db = await createTestDatabase();
  server = await startTestServer(db.url, productParts, { ...MEDIA_TEST_ENV, ...LOOPBACK_AUTHORITY_ENV });
  ({ lia, world, modPage, liaPage } = await mediaWorld(server, 'media-world', {
    directCalls: { enabled: true },
    spaces: [
      { id: 'town-hall', policy: stagePolicy() },
      { id: 'gated', policy: stagePolicy(authorityUrl) },
    ],
  }));
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
  authority.close();
});

async function refusedUpgrade(grant: string | undefined, origin = world.origin): Promise<{ status: number; code: string }> {
  try {
    const client = await MediaControlClient.connect(server.url, grant, origin);
    client.close();
    return assert.unreachable('admitted') as never;
  } catch (error) {
    const e = error as { status: number; body: string };
    return { status: e.status, code: (JSON.parse(e.body) as { code: string }).code };
  }
}

test('upgrade refusals: no grant, a grant without media:connect, another origin, a scope that names no room', async () => {
  assert.equal(await refusedUpgrade(undefined), { status: 401, code: 'media_grant_invalid' });
  assert.equal(await refusedUpgrade('pgt_forged'), { status: 401, code: 'media_grant_invalid' });
  assert.equal(await refusedUpgrade(await mediaGrant(liaPage, 'town-hall', ['media:join-space'])), { status: 403, code: 'media_scope_missing' });
  assert.equal(await refusedUpgrade(await mediaGrant(liaPage, 'town-hall'), 'https://elsewhere.example'), { status: 403, code: 'media_origin_mismatch' });
  assert.equal(await refusedUpgrade(await mediaGrant(liaPage, 'no-such-space')), { status: 404, code: 'media_scope_unknown' });
});

test('limits: a message over 16384 bytes closes 1009; more than 600 requests a minute closes 4029', async () => {
  const big = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'town-hall'), world.origin);
  big.sendRaw(JSON.stringify({ type: 'ping', id: 'x', pad: 'a'.repeat(16_400) }));
  assert.is(await big.closed, 1009);

  // A person of their own: the budget is the person's, and spending lia's would starve the tests after this one.
  const cy = await runtimePerson(server, 'chatty-cy');
  const cyPage = await (await cy.runtime(world)).open();
  const chatty = await MediaControlClient.connect(server.url, await mediaGrant(cyPage, 'town-hall'), world.origin);
  const pong = await chatty.request('ping');
  assert.is(pong.ok, true);
  for (let i = 0; i < 600; i += 1) chatty.sendRaw(JSON.stringify({ type: 'ping', id: `p${i}` }));
  assert.is(await chatty.closed, 4029);
  assert.ok(chatty.pushes.some((p) => p.type === 'error' && p.code === 'rate_limited'));
});

test("requestsPerMinute is the person's: reconnecting does not buy another 600 requests in the same minute", async () => {
  const rey = await runtimePerson(server, 'reconnecting-rey');
  const grant = await mediaGrant(await (await rey.runtime(world)).open(), 'town-hall');
  const started = performance.now();
  let answered = 0;
  const closeCodes: number[] = [];
  for (let round = 0; round < 5; round++) {
    const conn = await MediaControlClient.connect(server.url, grant, world.origin);
    // 600 requests at once, a whole minute's budget; over it the connection closes 4029 and the rest go unanswered.
    const replies = await Promise.all(Array.from({ length: 600 }, () => conn.request('ping').then((r) => r.ok, () => false)));
    answered += replies.filter(Boolean).length;
    if (conn.closeCode === undefined) conn.close();
    closeCodes.push(await conn.closed);
  }
  const seconds = (performance.now() - started) / 1000;
  // A token bucket: a burst of 600, then 600 a minute (10 a second) for as long as the test ran, and no more.
  const allowed = 600 + Math.ceil(seconds * 10);
  assert.ok(answered >= 600, `the first connection had its whole budget (${answered} answered)`);
  assert.ok(answered <= allowed, `one person had ${answered} requests answered in ${seconds.toFixed(1)} s over 5 connections (allowed ${allowed})`);
  assert.equal(closeCodes.slice(1), [4029, 4029, 4029, 4029], 'every reconnect found the budget spent');
});

test('maxConcurrentSessions 1: a newer connection of the same person replaces the older (session.ended replaced, 4409)', async () => {
  const first = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'town-hall'), world.origin);
  const second = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'town-hall'), world.origin);
  assert.is(await first.closed, 4409);
  assert.ok(first.pushes.some((p) => p.type === 'session.ended' && p.reason === 'replaced'));
  assert.is((await second.request('ping')).ok, true);
  second.close();
});

test('the grant ends with its fence: a newer Runtime of the person closes the connection (4401)', async () => {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'town-hall'), world.origin);
  liaPage = await (await lia.runtime(world)).open();
  assert.is(await conn.closed, 4401);
  assert.ok(conn.pushes.some((p) => p.type === 'session.ended' && p.reason === 'grant_ended'));
});

test('a stage: moderator seated, listener raises a hand, gets an offer, accepts; a grant without media:publish cannot produce', async () => {
  const moderator = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'town-hall'), world.origin);
  const listener = await MediaControlClient.connect(server.url, await mediaGrant(liaPage, 'town-hall', ['media:connect', 'media:join-space', 'media:request-speak']), world.origin);
  const joined = await moderator.request('room.join', { rtpCapabilities: {} });
  assert.is(joined.ok, true, JSON.stringify(joined.error));
  const self = joined.result?.self as { role: string; seated: boolean; memberId: string };
  assert.equal([self.role, self.seated], ['moderator', true]);
  assert.ok((joined.result?.routerRtpCapabilities as { codecs: unknown[] }).codecs.length > 0);
  const heard = await listener.request('room.join', { rtpCapabilities: {} });
  const liaId = (heard.result?.self as { memberId: string }).memberId;
  assert.equal((heard.result?.self as { role: string }).role, 'listener');

  const notSeated = await listener.request('produce', { transportId: 'none', kind: 'audio', source: 'microphone', rtpParameters: {} });
  assert.equal([notSeated.ok, notSeated.error?.code], [false, 'scope_missing'], 'no media:publish in the grant');
  assert.match(notSeated.error?.requestId ?? '', /^req_[\w-]{16}$/, 'a refusal carries a request id of its own');
  const offerByListener = await listener.request('speaker.offer', { target: self.memberId });
  assert.is(offerByListener.error?.code, 'not_moderator');

  assert.is((await listener.request('hand.raise')).ok, true);
  const raised = await moderator.view((room) => room.handQueue.includes(liaId));
  assert.equal(raised.handQueue, [liaId]);
  assert.is(raised.members.find((m) => m.memberId === liaId)?.handPosition, 1);
  assert.is((await moderator.request('speaker.offer', { target: liaId })).ok, true);
  const offered = await listener.view((room) => room.offers.some((o) => o.target === liaId));
  assert.is(offered.members.find((m) => m.memberId === liaId)?.offer?.by, self.memberId);
  assert.is((await listener.request('speaker.accept')).ok, true);
  const seated = await moderator.view((room) => room.members.some((x) => x.memberId === liaId && x.seated));
  assert.equal(seated.handQueue, [], 'accepting lowers the hand');
  moderator.close();
  listener.close();
});

test('the publisher-authority callback: forwarded grant in `grant`; a deny refuses; a failing backend refuses', async () => {
  const grant = await mediaGrant(modPage, 'gated');
  const moderator = await MediaControlClient.connect(server.url, grant, world.origin);
  assert.is((await moderator.request('room.join', { rtpCapabilities: {} })).ok, true);
  const denied = await moderator.request('produce', { transportId: 'none', kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP });
  assert.equal([denied.ok, denied.error?.code], [false, 'publisher_denied']);
  const asked = authorityBodies.at(-1)!;
  assert.is(asked.grant, grant);
  assert.equal([asked.environmentId, asked.scope, asked.spaceId, asked.source], [world.environmentId, 'gated', 'gated', 'microphone']);

  authorityAnswer = { status: 500, body: '{}' };
  assert.is((await moderator.request('produce', { transportId: 'none', kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP })).error?.code, 'publisher_denied');
  authorityAnswer = { status: 200, body: JSON.stringify({ decision: 'allow' }) };
  const allowed = await moderator.request('produce', { transportId: 'none', kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP });
  assert.is(allowed.error?.code, 'transport_not_found', 'allowed by the backend, then refused only for the made-up transport');
  moderator.close();
});

test('malformed mediasoup parameters are the client\'s mistake: invalid_media_parameters, before the backend is asked', async () => {
  const moderator = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'gated'), world.origin);
  const badCapabilities = await moderator.request('room.join', { rtpCapabilities: { codecs: 'opus' } });
  assert.equal([badCapabilities.ok, badCapabilities.error?.code], [false, 'invalid_media_parameters']);
  assert.is((await moderator.request('room.join', { rtpCapabilities: {} })).ok, true);
  const asked = authorityBodies.length;
  for (const rtpParameters of [{}, { codecs: [{}] }, { codecs: [{ mimeType: 1 }] }, { codecs: [null] }]) {
    const refused = await moderator.request('produce', { transportId: 'none', kind: 'audio', source: 'microphone', rtpParameters });
    assert.equal([refused.ok, refused.error?.code], [false, 'invalid_media_parameters'], JSON.stringify(rtpParameters));
  }
  assert.is(authorityBodies.length, asked, 'the publisher authority is not asked about a malformed request');
  moderator.close();
});

test('media-v2-data-plane: the served AsyncAPI 3.0.0 document validates, names every message, and the manifest pins its bytes', async () => {
  const res = await fetch(`${server.url}/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane`);
  assert.is(res.status, 200);
  assert.is(res.headers.get('content-type'), 'application/vnd.aai.asyncapi+json');
  const text = await res.text();
  const diagnostics = await new Parser().validate(text, { source: 'media-v2-data-plane.json' });
  const serious = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error || d.severity === DiagnosticSeverity.Warning);
  assert.equal(serious.map((d) => `${String(d.code)} /${d.path.join('/')}: ${d.message}`), []);
  const document = JSON.parse(text) as { asyncapi: string; info: { description: string }; channels: Record<string, { address: string }>; components: { messages: Record<string, { name: string }> } };
  assert.is(document.asyncapi, '3.0.0');
  assert.equal(Object.values(document.channels).map((c) => c.address), ['/v1/plugins/media/control']);
  const names = new Set(Object.values(document.components.messages).map((m) => m.name));
  for (const option of [...MediaV2ClientMessageSchema.options, ...MediaV2ServerMessageSchema.options]) assert.ok(names.has(option.shape.type.value), option.shape.type.value);
  assert.match(document.info.description, /speaker\.offer/, 'the room rules are part of the document');

  const manifest = (await (await fetch(`${server.url}/v1/catalog/plugins/plg_media/manifest`)).json()) as { protocolArtifacts: Array<{ id: string; sha256: string }> };
  const pinned = manifest.protocolArtifacts.find((a) => a.id === 'media-v2-data-plane');
  assert.is(pinned?.sha256, createHash('sha256').update(text).digest('hex'));
});

test.run();
