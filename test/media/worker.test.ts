import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as mediasoup from 'mediasoup';
import type { types } from 'mediasoup';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  cachedWorkerBin,
  resolveWorkerBinary,
  WORKER_BUILD_SCRIPT,
  WorkerBinaryMissingError,
} from '../../media/worker-binary.js';
import { isAlive } from '../support/process.js';
import { waitFor } from '../support/wait.js';
import {
  bindLoopback,
  dtlsClientHello,
  isDtlsHandshake,
  isStunSuccess,
  nextMessage,
  stunBindingRequest,
} from '../support/webrtc-wire.js';

/**
 * A real mediasoup-worker process (upstream prebuilt, or the Debian build of scripts/build-mediasoup-worker.sh),
 * driven through mediasoup's own API on loopback.
 */
const opus: types.RouterRtpCodecCapability = { kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2 };
const loopback: types.TransportListenInfo = { protocol: 'udp', ip: '127.0.0.1' };

let worker: types.Worker;
let scratch: string;

test.before(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'registry-media-'));
  worker = await mediasoup.createWorker({ workerBin: resolveWorkerBinary().path, logLevel: 'warn' });
});
test.after(async () => {
  worker?.close();
  await rm(scratch, { recursive: true, force: true });
});

test('resolution: an explicit MEDIASOUP_WORKER_BIN that does not exist is refused, not replaced', () => {
  assert.throws(
    () => resolveWorkerBinary({ MEDIASOUP_WORKER_BIN: path.join(scratch, 'nope') }),
    (e: unknown) => e instanceof WorkerBinaryMissingError && /MEDIASOUP_WORKER_BIN=/.test(e.message),
  );
});

test('resolution: with no binary anywhere the error names the build script; the cache is keyed by version', async () => {
  const env = { MEDIASOUP_WORKER_CACHE: path.join(scratch, 'cache') };
  const noUpstream = path.join(scratch, 'no-upstream');
  assert.throws(
    () => resolveWorkerBinary(env, noUpstream),
    (e: unknown) => e instanceof WorkerBinaryMissingError && e.message.includes(WORKER_BUILD_SCRIPT),
  );
  const cached = cachedWorkerBin(env);
  assert.is(cached, path.join(scratch, 'cache', mediasoup.version, 'mediasoup-worker'));
  await mkdir(path.dirname(cached), { recursive: true });
  await writeFile(cached, '');
  await chmod(cached, 0o755);
  assert.equal(resolveWorkerBinary(env, noUpstream), { source: 'cache', path: cached });
});

test('a real worker: router with opus, WebRtcTransport on 127.0.0.1, resource usage', async () => {
  const router = await worker.createRouter({ mediaCodecs: [opus] });
  assert.ok(router.rtpCapabilities.codecs?.some((c) => c.mimeType.toLowerCase() === 'audio/opus'));

  const transport = await router.createWebRtcTransport({ listenInfos: [loopback] });
  const candidate = transport.iceCandidates[0];
  assert.is(candidate?.address, '127.0.0.1');
  assert.is(candidate?.protocol, 'udp');
  assert.ok((candidate?.port ?? 0) > 0);
  assert.ok(transport.dtlsParameters.fingerprints.length > 0);
  assert.is(transport.dtlsState, 'new');

  const usage = await worker.getResourceUsage();
  assert.ok(usage.ru_maxrss > 0, 'the worker reports its resident memory');
  assert.ok(usage.ru_utime >= 0);

  router.close();
  assert.ok(transport.closed, 'closing the router closes its transports');
});

// SRTP is done by a header of ours over Debian's libsrtp2 (media/worker-build/…/srtp.h): push RTP through a pipe
// with SRTP between two routers and check the payload arrives intact.
test('SRTP through the libsrtp2 shim: RTP piped with SRTP between two routers arrives intact', async () => {
  const [routerA, routerB] = [await worker.createRouter({ mediaCodecs: [opus] }), await worker.createRouter({ mediaCodecs: [opus] })];
  const source = await bindLoopback();
  const sink = await bindLoopback();
  try {
    const plainIn = await routerA.createPlainTransport({ listenInfo: loopback, rtcpMux: true, comedia: true });
    const producer = await plainIn.produce({
      kind: 'audio',
      rtpParameters: {
        codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48000, channels: 2 }],
        encodings: [{ ssrc: 1111 }],
      },
    });

    const pipeA = await routerA.createPipeTransport({ listenInfo: loopback, enableSrtp: true });
    const pipeB = await routerB.createPipeTransport({ listenInfo: loopback, enableSrtp: true });
    assert.ok(pipeA.srtpParameters && pipeB.srtpParameters);
    await pipeA.connect({ ip: '127.0.0.1', port: pipeB.tuple.localPort, srtpParameters: pipeB.srtpParameters });
    await pipeB.connect({ ip: '127.0.0.1', port: pipeA.tuple.localPort, srtpParameters: pipeA.srtpParameters });
    const pipeConsumer = await pipeA.consume({ producerId: producer.id });
    const pipeProducer = await pipeB.produce({ kind: 'audio', rtpParameters: pipeConsumer.rtpParameters });

    const plainOut = await routerB.createPlainTransport({ listenInfo: loopback, rtcpMux: true, comedia: false });
    await plainOut.connect({ ip: '127.0.0.1', port: sink.address().port });
    const consumer = await plainOut.consume({ producerId: pipeProducer.id, rtpCapabilities: routerB.rtpCapabilities });

    const payload = Buffer.from('\xfcregistry srtp check', 'latin1');
    let seq = 0;
    const sender = setInterval(() => {
      seq += 1;
      source.send(rtpPacket(seq, seq * 960, 1111, payload), plainIn.tuple.localPort, '127.0.0.1');
    }, 20);
    // RTCP shares the port (rtcpMux); its packet types are 192-223 (RFC 5761).
    const isRtp = (m: Buffer): boolean => m.length > 12 && ((m[1] ?? 0) < 192 || (m[1] ?? 0) > 223);
    const packet = await nextMessage(sink, isRtp, 'RTP out of router B').finally(() => clearInterval(sender));

    assert.ok(packet.subarray(packet.length - payload.length).equals(payload), 'payload unchanged');
    assert.is(packet.readUInt32BE(8), consumer.rtpParameters.encodings?.[0]?.ssrc, "the consumer's SSRC");
    const [pipeStats] = await pipeB.getStats();
    assert.ok((pipeStats?.rtpBytesReceived ?? 0) > 0, 'router B received (and decrypted) SRTP on its pipe');
  } finally {
    routerA.close();
    routerB.close();
    source.close();
    sink.close();
  }
});

// Debian's OpenSSL has kTLS, which crashed upstream's DTLS code on the first ClientHello until the build script's
// BIO_CB_RETURN fix: complete ICE as a browser would, send a ClientHello, and expect the server's first flight.
test('DTLS with Debian OpenSSL: after ICE, a WebRtcTransport answers a ClientHello and the worker lives', async () => {
  const router = await worker.createRouter({ mediaCodecs: [opus] });
  const client = await bindLoopback();
  try {
    const transport = await router.createWebRtcTransport({ listenInfos: [loopback] });
    const port = transport.iceCandidates[0]?.port ?? 0;
    await transport.connect({
      dtlsParameters: { role: 'client', fingerprints: [{ algorithm: 'sha-256', value: Array(32).fill('AB').join(':') }] },
    });
    const { usernameFragment, password } = transport.iceParameters;
    client.send(stunBindingRequest(`${usernameFragment}:nodeclient`, password), port, '127.0.0.1');
    await nextMessage(client, isStunSuccess, 'STUN Binding success response');
    await waitFor(() => transport.iceState === 'completed', 'ICE to complete');

    const died = new Promise<never>((_, reject) =>
      worker.once('died', (error) => reject(new Error(`the worker died on the ClientHello: ${error.message}`))),
    );
    client.send(dtlsClientHello(), port, '127.0.0.1');
    const flight = await Promise.race([nextMessage(client, isDtlsHandshake, 'DTLS handshake record from the server'), died]);
    assert.is(flight[0], 22);
    assert.is(transport.dtlsState, 'connecting');
    assert.not.ok(worker.died);
    assert.ok((await worker.getResourceUsage()).ru_maxrss > 0, 'the worker still answers');
  } finally {
    router.close();
    client.close();
  }
});

test('closing the worker ends its process', async () => {
  const pid = worker.pid;
  assert.ok(isAlive(pid));
  worker.close();
  assert.ok(worker.closed);
  assert.not.ok(worker.died);
  await waitFor(() => !isAlive(pid), 'the mediasoup-worker process to exit');
});

function rtpPacket(seq: number, timestamp: number, ssrc: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(12);
  header[0] = 0x80; // version 2, no padding, no extension, no CSRC
  header[1] = 100; // payload type, no marker
  header.writeUInt16BE(seq & 0xffff, 2);
  header.writeUInt32BE(timestamp >>> 0, 4);
  header.writeUInt32BE(ssrc, 8);
  return Buffer.concat([header, payload]);
}


test.run();
