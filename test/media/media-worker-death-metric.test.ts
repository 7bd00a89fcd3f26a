import { execFileSync } from 'node:child_process';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { meetingPolicy } from '../support/media-room.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A mediasoup worker that dies takes every call on it down for a moment (media.reset): /metrics counts the deaths, and
 * whether a replacement started, so an operator sees a crashing worker build or a node left without workers.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);

const deaths = async (replacement: string) =>
  new RegExp(`^registry_media_worker_deaths_total\\{replacement="${replacement}"\\} (\\d+)$`, 'm').exec(await (await fetch(`${server.opsUrl}/metrics`)).text())?.[1];

function workerPids(): number[] {
  const out = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'mediasoup-worker'], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean).map(Number);
}

test('a worker killed under a room is counted as a death whose replacement started', async () => {
  assert.is(await deaths('started'), '0');
  const { world, modPage } = await mediaWorld(server, 'worker-deaths', {
    directCalls: { enabled: false },
    spaces: [{ id: 'hall', policy: meetingPolicy({ floorControl: 'open', raiseHand: 'disabled' }) }],
  });
  const mod = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'hall'), world.origin);
  const joined = await mod.request('room.join', { rtpCapabilities: {} });
  assert.is(joined.ok, true, JSON.stringify(joined.error));
  const [pid] = workerPids();
  assert.ok(pid, 'the pool runs a worker');
  process.kill(pid, 'SIGKILL');
  await waitFor(async () => (await deaths('started')) === '1', 'the death to be counted');
  assert.is(await deaths('failed'), '0');
  mod.close();
});

test.run();
