import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MediaCloseCode } from '../../media/control/media-control.messages.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import { productParts } from '../../server/main.js';
import { enrolAnother } from '../support/identity.js';
import { ALL_MEDIA_SCOPES, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A Media connection whose grant ends while the connection is being admitted: the upgrade verified the grant, and the
 * end lands before the connection listens for its session's activity, the grant's revocation and the account's
 * sign-ins. It must close at once all the same (docs/media.md: the end of the grant's fence or sign-in, or its
 * revocation, "closes it at once"), as an open connection does, not live on until a request or the 15 s sweep (which
 * never runs here: the clock stands still).
 */
let server: TestServer;
let world: TestEnvironment;
const clock = new ManualClock(Date.now());
const people = new Map<string, RuntimePerson>();

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV, clock);
test.before(async () => {
  ({ world } = await mediaWorld(server, 'media-admission-end', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } }],
  }));
  for (const handle of ['rel-mae', 'rev-mae', 'out-mae']) {
    const someone = await runtimePerson(server, handle);
    someone.device.now = () => clock.now();
    people.set(handle, someone);
  }
});

/** Connects with a fresh grant of `page`, running `during` inside the upgrade right after the grant was verified. */
async function connectWithEndDuringUpgrade(page: RuntimeClient, during: (grantId: string) => Promise<void>): Promise<MediaControlClient> {
  const res = await page.pluginGrant('plg_media', { component: 'control', scopes: ALL_MEDIA_SCOPES, context: { scope: 'room' } });
  assert.is(res.status, 201);
  const { grant, grantId } = (await res.json()) as { grant: string; grantId: string };
  const { pluginGrants } = await runtimeServices(server.services);
  const original = pluginGrants.verify.bind(pluginGrants);
  let done = false;
  pluginGrants.verify = async (token, pluginId) => {
    const verified = await original(token, pluginId);
    if (token === grant && !done) {
      done = true;
      await during(grantId);
    }
    return verified;
  };
  try {
    return await MediaControlClient.connect(server.url, grant, world.origin);
  } finally {
    pluginGrants.verify = original;
  }
}

async function assertGrantEnded(conn: MediaControlClient, when: string): Promise<void> {
  const code = await Promise.race([conn.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 2000))]);
  assert.is.not(code, 'open', `Media connection still open 2 s ${when}; heard ${JSON.stringify(conn.pushes)}`);
  assert.is(code, MediaCloseCode.grantEnded);
  assert.equal(conn.pushes.find((p) => p.type === 'session.ended'), { type: 'session.ended', reason: 'grant_ended' });
}

test('the Runtime session is released while the connection is admitted: it closes 4401 once open', async () => {
  const page = await (await people.get('rel-mae')!.runtime(world)).open();
  const conn = await connectWithEndDuringUpgrade(page, async () => {
    assert.is((await page.release()).status, 200);
  });
  await assertGrantEnded(conn, 'after its session was released during the upgrade');
});

test('the grant is revoked while the connection is admitted: it closes 4401 once open', async () => {
  const page = await (await people.get('rev-mae')!.runtime(world)).open();
  const conn = await connectWithEndDuringUpgrade(page, async (grantId) => {
    const del = await fetch(`${server.url}/v1/runtime/plugins/plg_media/grants/${grantId}`, { method: 'DELETE', headers: page.headers() });
    assert.is(del.status, 204);
  });
  await assertGrantEnded(conn, 'after its grant was revoked during the upgrade');
});

test('the sign-in ends (a device signs out) while the connection is admitted: it closes 4401 once open', async () => {
  const someone = people.get('out-mae')!;
  const page = await (await someone.runtime(world)).open();
  await enrolAnother(server.url, 'out-mae', someone.device, 'out phone');
  const conn = await connectWithEndDuringUpgrade(page, async () => {
    const out = await someone.device.request(server.url, 'POST', '/v1/account/sign-out');
    assert.is(out.status, 204, await out.clone().text());
  });
  await assertGrantEnded(conn, 'after its sign-in ended during the upgrade');
});

test.run();
