import { execFileSync } from 'node:child_process';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { captureLogs } from '../support/log-capture.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { meetingPolicy } from '../support/media-room.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Through the socket: a `transport.create` waiting on the worker when it dies is answered `media_unavailable`, logged
 * as a refusal (debug), not `internal_error` with an error line per call (the death is logged once, by the pool), and
 * the member, which held no transport, gets one `media.reset` once the room is served again.
 */
const { logger, lines } = captureLogs('debug');

let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV, undefined, logger);

function workerPid(): number {
  const out = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'mediasoup-worker'], { encoding: 'utf8' });
  const [pid] = out.split('\n').filter(Boolean).map(Number);
  assert.ok(pid, 'the pool runs a worker');
  return pid;
}

test('transport.create cut by the worker\'s death: media_unavailable, no error line for it, one media.reset', async () => {
  const { world, modPage } = await mediaWorld(server, 'cut-through-socket', {
    directCalls: { enabled: false },
    spaces: [{ id: 'hall', policy: meetingPolicy({ floorControl: 'open', raiseHand: 'disabled' }) }],
  });
  const member = await MediaControlClient.connect(server.url, await mediaGrant(modPage, 'hall'), world.origin);
  try {
    assert.is((await member.request('room.join', { rtpCapabilities: {} })).ok, true);
    const pid = workerPid();
    process.kill(pid, 'SIGSTOP');
    const creating = member.request('transport.create', { direction: 'send' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    process.kill(pid, 'SIGKILL');
    const answer = await creating;
    const requestErrors = lines.filter((l) => l.level >= 50 && l.msg === 'media request failed').length;
    assert.equal({ ok: answer.ok, code: answer.error?.code, requestErrors }, { ok: false, code: 'media_unavailable', requestErrors: 0 });

    const resets = (): number => member.pushes.filter((m) => m.type === 'media.reset').length;
    await waitFor(() => resets() > 0, 'media.reset', 15_000);
    await waitFor(async () => (await member.request('transport.create', { direction: 'send' })).ok, 'the room served again', 15_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.is(resets(), 1, 'one media.reset');
  } finally {
    member.close();
  }
});

test.run();
