import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { LaggingClock } from '../support/lagging-clock.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { runtimeSocket } from '../support/runtime-socket.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The runtime socket checks every message against the lease first (the AsyncAPI document: "Every message is checked
 * against the lease first"). A lease lapses at its deadline, not when its timer is delivered or a renewal round runs
 * (an outage delays both): a socket past its lease's deadline must read nothing more, presence included.
 */
const LEASE_TTL_MS = 30_000;
const clock = new LaggingClock();
let server: TestServer;
let env: TestEnvironment;
let una: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_MS / 1000), ACTOR_TIMER_POLL_MS: '3600000' }, clock);
test.before(async () => {
  una = await runtimePerson(server, 'una-lr');
  una.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'lapsed-reads', 'una-lr');
});

for (const message of [{ type: 'presence.list', ref: 'l1' }, { type: 'ping', ref: 'p1' }]) {
  test(`past the lease's deadline, ${message.type} is refused: lease.ended lapsed, closed 4412`, async () => {
    const page = await (await una.runtime(env)).open();
    const socket = await runtimeSocket(page);
    await socket.next('ready');
    clock.lag += LEASE_TTL_MS + 1;
    socket.send(message);
    const closed = await Promise.race([socket.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 2000))]);
    assert.is.not(closed, 'open', `socket past its lease's deadline still open, heard ${JSON.stringify(socket.messages)}`);
    assert.equal(
      socket.messages.filter((m) => m.type !== 'ready' && m.type !== 'hint'),
      [{ type: 'lease.ended', reason: 'lapsed' }],
    );
    assert.is((closed as { code: number }).code, 4412);
    await page.release();
  });
}

test.run();
