import { pino } from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaWorkerPool, type WorkerLost } from '../../media/worker-pool.js';
import { failingWorkerSpawn, type FailingWorkerSpawn } from '../support/failing-worker-spawn.js';
import { isAlive } from '../support/process.js';
import { waitFor } from '../support/wait.js';

/** A dead worker whose replacement cannot start at first: the pool keeps starting one until it is up. */
const logger = pino({ level: 'silent' });
let spawn: FailingWorkerSpawn;
let pool: MediaWorkerPool | undefined;

test.before(async () => {
  spawn = await failingWorkerSpawn();
});
test.after(async () => {
  pool?.close();
  await spawn.remove();
});

test('a replacement that did not start is started again once spawning works, and the pool places routers again', async () => {
  pool = await MediaWorkerPool.create({ size: 1, logger, workerBin: spawn.workerBin });
  const [doomed] = pool.workers();
  const lost = new Promise<WorkerLost>((resolve) => pool!.onWorkerLost(resolve));
  await spawn.refuse();
  process.kill(doomed!.pid, 'SIGKILL');
  const event = await lost;
  assert.is(event.replacementPid, undefined, 'the first replacement did not start');
  assert.is(pool.size, 0);

  await spawn.allow();
  await waitFor(() => pool!.size === 1, 'the pool to start its replacement again', 15_000);
  const [replacement] = pool.workers();
  assert.ok(replacement!.pid !== doomed!.pid && isAlive(replacement!.pid));
  const router = await pool.createRouter('room-after', { mediaCodecs: [{ kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2 }] });
  assert.ok(router.rtpCapabilities.codecs?.length);
  router.close();
});

test('close() stops restarting a replacement that keeps failing', async () => {
  const other = await MediaWorkerPool.create({ size: 1, logger, workerBin: spawn.workerBin });
  const [doomed] = other.workers();
  const lost = new Promise<WorkerLost>((resolve) => other.onWorkerLost(resolve));
  await spawn.refuse();
  process.kill(doomed!.pid, 'SIGKILL');
  assert.is((await lost).replacementPid, undefined);
  other.close();
  await spawn.allow();
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.is(other.size, 0, 'a closed pool starts nothing');
});

test.run();
