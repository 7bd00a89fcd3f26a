import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type WebSocket from 'ws';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { fuzzSeed, Rng } from '../support/fuzz.js';
import { answerViolations, sendRaw, type RawRequest } from '../support/fuzz-wire.js';
import { clientMessages, ODD_FRAMES, openSocket, sendFrames, type SocketOutcome } from '../support/fuzz-sockets.js';
import { captureLogs } from '../support/log-capture.js';
import { configureMedia, mediaGrant, MEDIA_TEST_ENV } from '../support/media-control.js';
import { controlToken, controlUrl } from '../support/runtime-socket.js';
import { runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The WebSocket endpoints against fuzzed upgrades and first messages, through the real server: upgrades are refused
 * with a 4xx in the error format (never a 5xx), a message no endpoint takes is answered or closes the socket with a
 * documented code (never 1011, never without a close frame), and nothing a client sends is logged as a server error.
 */
const { logger, lines } = captureLogs('warn');
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;
const counts: Record<string, number> = {};
withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV, undefined, logger);
test.before(async () => {
  const person = await runtimePerson(server, 'socketfuzzer');
  world = await testEnvironment(server.opsUrl, 'socket-fuzz', 'socketfuzzer');
  await configureMedia(server.opsUrl, world.environmentId, {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 5, maxSpeakerSeats: 2, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 5 } }],
  });
  page = await (await person.runtime(world)).open();
});
test.after(() => console.log(`fuzz-socket-messages messages and upgrades sent: ${JSON.stringify(counts)}`));

const JSON_CODEC = 'registry.v1.json';
const bearer = (token: string): string => `registry.bearer.${token}`;
const wsUrl = (path: string): string => `${server.url.replace(/^http/, 'ws')}${path}`;

async function assertClean(area: string, outcome: SocketOutcome, sent: number): Promise<void> {
  counts[area] = sent;
  if (process.env.FUZZ_OUTCOMES) console.log(area, JSON.stringify(outcome));
  assert.equal(outcome.failures, []);
  assert.is((await fetch(`${server.url}/ready`)).status, 200);
  assert.equal(lines.filter((l) => l.level >= 50), [], 'client input logged as a server error');
}

test('runtime socket: every client message at its bounds and broken, and frames of no message', async () => {
  const frames = [...(await clientMessages(`${server.url}/v1/runtime/asyncapi.json`, new Rng(fuzzSeed(0x5eed21)), 12, 16_384)), ...ODD_FRAMES];
  const outcome = await sendFrames(() => openSocket(page.socketUrl(), [JSON_CODEC, bearer(page.accessToken)], page.origin), frames, 2 * 16_384);
  await assertClean('runtime-socket', outcome, frames.length);
});

test('control channel: any first message', async () => {
  const token = await controlToken(page);
  const frames = [...ODD_FRAMES, { name: 'ping', frame: '{"type":"ping"}' }];
  const outcome = await sendFrames(() => openSocket(controlUrl(server.url), [JSON_CODEC, bearer(token)], page.origin), frames, 2 * 1_024);
  await assertClean('control-channel', outcome, frames.length);
});

test('media control: every client message at its bounds and broken, and frames of no message', async () => {
  const grant = await mediaGrant(page, 'room');
  const frames = [...(await clientMessages(`${server.url}/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane`, new Rng(fuzzSeed(0x5eed22)), 4, 16_384)), ...ODD_FRAMES];
  const outcome = await sendFrames(() => openSocket(wsUrl('/v1/plugins/media/control'), [JSON_CODEC, bearer(grant)], world.origin), frames, 2 * 16_384);
  await assertClean('media-control', outcome, frames.length);
});

test('media control after room.join: every client message at its bounds and broken', async () => {
  const grant = await mediaGrant(page, 'room');
  const frames = await clientMessages(`${server.url}/v1/catalog/plugins/plg_media/artifacts/media-v2-data-plane`, new Rng(fuzzSeed(0x5eed24)), 3, 16_384);
  const joined = async (): Promise<WebSocket> => {
    const ws = await openSocket(wsUrl('/v1/plugins/media/control'), [JSON_CODEC, bearer(grant)], world.origin);
    const answered = new Promise((resolve) => ws.on('message', (data) => String(data).includes('"id":"join"') && resolve(undefined)));
    ws.send(JSON.stringify({ type: 'room.join', id: 'join', rtpCapabilities: {} }));
    await answered;
    return ws;
  };
  const outcome = await sendFrames(joined, frames, 2 * 16_384);
  await assertClean('media-control-joined', outcome, frames.length);
});

test('upgrades with odd subprotocols, bearers, origins, keys and queries, on every socket path', async () => {
  const rng = new Rng(fuzzSeed(0x5eed23));
  const token = await controlToken(page);
  const query = new URL(page.socketUrl()).search;
  const protocols = ['', JSON_CODEC, `${JSON_CODEC}, ${bearer('x')}`, `${JSON_CODEC}, ${bearer(page.accessToken)}`, `${JSON_CODEC}, ${bearer(token)}`, `${JSON_CODEC},,,`, bearer('\u00e9'), `${JSON_CODEC}, ${bearer('t'.repeat(6000))}`];
  const origins = [page.origin, 'null', '', 'https://a.example', `https://\u00ff.example`];
  const keys = ['dGhlIHNhbXBsZSBub25jZQ==', '', 'short', '!!!!!!!!!!!!!!!!!!!!!!!='];
  const queries = [query, '', '?session=&lease=&leaseVersion=', '?session=%00&lease=%ED%A0%80&leaseVersion=1e309', `${query}&leaseVersion=9007199254740993`, `${query}&${query.slice(1)}`, '?%zz'];
  const failures: string[] = [];
  let sent = 0;
  for (const path of ['/v1/runtime/socket', '/v1/runtime/control', '/v1/plugins/media/control', '/v1/runtime/socket/x']) {
    for (let i = 0; i < 30; i += 1) {
      const headers: Array<[string, string]> = [
        ['Connection', 'Upgrade'],
        ['Upgrade', rng.pick(['websocket', 'WebSocket', 'h2c', ''])],
        ['Sec-WebSocket-Version', rng.pick(['13', '8', '', '13, 13'])],
        ['Sec-WebSocket-Key', rng.pick(keys)],
        ['Sec-WebSocket-Protocol', rng.pick(protocols)],
        ['Origin', rng.pick(origins)],
      ];
      if (rng.int(3) === 0) headers.push(['Authorization', rng.pick([`Bearer ${page.accessToken}`, 'Bearer x', 'Basic x'])]);
      const request: RawRequest = { method: 'GET', target: `${path}${rng.pick(queries)}`, headers };
      sent += 1;
      const response = await sendRaw(server.port, request).catch((error: Error) => error);
      if (response instanceof Error) failures.push(`${request.target}: ${response.message}`);
      else if (response.status !== 101) failures.push(...answerViolations('GET', response, new Set([503])).map((v) => `${request.target} ${JSON.stringify(headers)}: ${v}`));
    }
  }
  counts.upgrades = sent;
  assert.equal(failures.slice(0, 10), []);
  assert.is((await fetch(`${server.url}/ready`)).status, 200);
  assert.equal(lines.filter((l) => l.level >= 50), [], 'client input logged as a server error');
});

test.run();
