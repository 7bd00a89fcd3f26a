import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { resolveWorkerBinary } from '../../media/worker-binary.js';
import { launchChromium, type ChromiumHandle } from '../support/chromium.js';
import { LoopbackSfuPeer } from '../support/loopback-sfu.js';
import { type MediaPage, MediaPageServer } from '../support/media-page.js';
import { waitFor } from '../support/wait.js';

/**
 * Real media through the test page without the control plane: headless Debian Chromium with fake capture devices,
 * mediasoup-client in the page, a real mediasoup worker in this process, and the page's media requests answered here
 * (LoopbackSfuPeer through page.exposeFunction). Proves the page, the browser flags and the SFU path that the
 * control-plane end-to-end tests build on.
 */
const mediaCodecs: types.RouterRtpCodecCapability[] = [
  { kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2 },
  { kind: 'video', mimeType: 'video/VP8', clockRate: 90000 },
];

let worker: types.Worker;
let router: types.Router;
let browser: ChromiumHandle;
let server: MediaPageServer;
const peers: LoopbackSfuPeer[] = [];

test.before(async () => {
  worker = await mediasoup.createWorker({ workerBin: resolveWorkerBinary().path, logLevel: 'warn' });
  router = await worker.createRouter({ mediaCodecs });
  [browser, server] = await Promise.all([launchChromium(), MediaPageServer.start()]);
});
test.after(async () => {
  for (const peer of peers) peer.close();
  await server?.close();
  await browser?.close();
  worker?.close();
});

/** A page whose Device is loaded with the router's capabilities and whose media requests reach the router. */
async function participant(): Promise<{ page: MediaPage; peer: LoopbackSfuPeer }> {
  const page = await server.open(browser);
  const deviceCapabilities = await page.api.createDevice(router.rtpCapabilities);
  // The page's capabilities come from mediasoup-client's Device, built from the router's own.
  const peer = new LoopbackSfuPeer(router, deviceCapabilities as types.RtpCapabilities);
  peers.push(peer);
  await page.useSignal((type, payload) => peer.handle(type, payload));
  return { page, peer };
}

test('the fake microphone published by one page is heard by another: packets, no loss, audio energy', async () => {
  const alice = await participant();
  const bob = await participant();

  const { producerId } = await alice.page.api.publishMicrophone();
  assert.ok(alice.peer.producers.has(producerId), 'the producer id is the server’s');
  const { kind } = await bob.page.api.consume(producerId);
  assert.is(kind, 'audio');

  const heard = await waitFor(async () => {
    const [measurement] = await bob.page.api.consumerStats();
    return measurement && measurement.packetsReceived > 50 && measurement.totalAudioEnergy > 0 && measurement;
  }, 'page B to receive and play audio', 15_000);
  assert.is(heard.producerId, producerId);
  assert.is(heard.packetsLost, 0, 'loopback loses nothing');
  assert.ok(heard.bytesReceived > 0);

  const [sent] = await alice.page.api.producerStats();
  assert.ok((sent?.packetsSent ?? 0) > 0 && sent?.source === 'microphone', 'page A reports what it sent');
  const serverStats = await alice.peer.producers.get(producerId)?.getStats();
  assert.ok((serverStats?.[0]?.byteCount ?? 0) > 0, 'the server producer counted bytes');
  assert.equal([...alice.page.errors(), ...bob.page.errors()], []);
});

test('a fake screen (getDisplayMedia) published as VP8 is decoded by another page', async () => {
  const alice = await participant();
  const bob = await participant();

  const { producerId } = await alice.page.api.publishScreen('slides');
  const producer = alice.peer.producers.get(producerId);
  assert.is(producer?.kind, 'video');
  assert.is(producer?.rtpParameters.codecs[0]?.mimeType.toLowerCase(), 'video/vp8');
  assert.is(producer?.appData.source, 'screen');
  const { kind } = await bob.page.api.consume(producerId);
  assert.is(kind, 'video');

  const seen = await waitFor(async () => {
    const [measurement] = await bob.page.api.consumerStats();
    return measurement && measurement.framesDecoded > 0 && measurement;
  }, 'page B to decode screen frames', 15_000);
  assert.ok(seen.frameWidth > 0 && seen.frameHeight > 0, `decoded ${seen.frameWidth}×${seen.frameHeight}`);
  assert.equal([...alice.page.errors(), ...bob.page.errors()], []);
});

test.run();
