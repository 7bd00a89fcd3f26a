import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaPoolClosedError, MediaWorkerPool, type WorkerLost } from '../../media/worker-pool.js';
import { isAlive } from '../support/process.js';
import { waitFor } from '../support/wait.js';

/** Real mediasoup workers (two, so placement has a choice), nothing but loopback. */
const logger = pino({ level: 'silent' });
const opus = { kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2 } as const;
let pool: MediaWorkerPool;

test.before(async () => {
  pool = await MediaWorkerPool.create({ size: 2, logger });
});
test.after(() => pool?.close());

test('size: one worker per requested slot, each its own process, idle at load 0', () => {
  const workers = pool.workers();
  assert.is(pool.size, 2);
  assert.is(new Set(workers.map((w) => w.pid)).size, 2);
  for (const w of workers) {
    assert.ok(isAlive(w.pid));
    assert.equal({ ...w, pid: 0 }, { pid: 0, routers: 0, transports: 0, producers: 0, consumers: 0, load: 0, rooms: [] });
  }
});

test('least-loaded placement: the load counts transports, producers and consumers; closing gives it back', async () => {
  const first = pool.leastLoaded();
  const routerA = await pool.createRouter('room-a', { mediaCodecs: [opus] });
  const a = pool.workers().find((w) => w.rooms.includes('room-a'));
  assert.is(a?.pid, first.pid, 'the first router goes to the least-loaded worker');

  const transport = await routerA.createPlainTransport({ listenInfo: { protocol: 'udp', ip: '127.0.0.1' }, comedia: true });
  const producer = await transport.produce({
    kind: 'audio',
    rtpParameters: { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48000, channels: 2 }], encodings: [{ ssrc: 7 }] },
  });
  const out = await routerA.createPlainTransport({ listenInfo: { protocol: 'udp', ip: '127.0.0.1' } });
  await out.consume({ producerId: producer.id, rtpCapabilities: routerA.rtpCapabilities });
  const loaded = pool.workers().find((w) => w.pid === first.pid)!;
  assert.equal([loaded.transports, loaded.producers, loaded.consumers, loaded.load], [2, 1, 1, 4]);

  const second = pool.leastLoaded();
  assert.is.not(second.pid, first.pid, 'the next placement goes to the idle worker');
  const routerB = await pool.createRouter('room-b', { mediaCodecs: [opus] });
  assert.ok(pool.workers().find((w) => w.pid === second.pid)?.rooms.includes('room-b'));
  assert.is(pool.leastLoaded(new Set([second.pid])).pid, first.pid, 'avoid wins over load while another worker lives');

  routerA.close();
  routerB.close();
  for (const w of pool.workers()) assert.equal([w.load, w.routers, w.rooms], [0, 0, []]);
});

test('a worker killed with SIGKILL is replaced and listeners learn which rooms lost media', async () => {
  const router = await pool.createRouter('room-doomed', { mediaCodecs: [opus] });
  const doomed = pool.workers().find((w) => w.rooms.includes('room-doomed'))!;
  const survivor = pool.workers().find((w) => w.pid !== doomed.pid)!;
  const lost = new Promise<WorkerLost>((resolve) => pool.onWorkerLost(resolve));

  process.kill(doomed.pid, 'SIGKILL');
  const event = await lost;
  assert.is(event.type, 'worker.lost');
  assert.is(event.pid, doomed.pid);
  assert.equal(event.rooms, ['room-doomed']);
  assert.ok(event.replacementPid !== undefined && event.replacementPid !== doomed.pid);
  assert.ok(router.closed, "the dead worker's router is closed");

  const pids = pool.workers().map((w) => w.pid);
  assert.is(pool.size, 2);
  assert.ok(pids.includes(survivor.pid) && pids.includes(event.replacementPid!));
  assert.ok(isAlive(event.replacementPid!));
  const fresh = await pool.createRouter('room-after', { mediaCodecs: [opus] });
  assert.ok(fresh.rtpCapabilities.codecs?.length, 'the pool places routers again');
  fresh.close();
});

test('close() is idempotent, ends every worker process, and refuses placement afterwards', async () => {
  const pids = pool.workers().map((w) => w.pid);
  pool.close();
  pool.close();
  assert.ok(pool.closed);
  assert.is(pool.size, 0);
  assert.throws(() => pool.leastLoaded(), (e: unknown) => e instanceof MediaPoolClosedError);
  for (const pid of pids) await waitFor(() => !isAlive(pid), `worker ${pid} to exit`);
});


test.run();
