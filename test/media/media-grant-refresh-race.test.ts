import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MediaCloseCode } from '../../media/control/media-control.messages.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import { productParts } from '../../server/main.js';
import { ALL_MEDIA_SCOPES, mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A grant adopted by `grant.refresh` and revoked while the refresh was being verified: the connection followed the
 * old grant then, so the revocation of the new one reached no listener of it. Like the upgrade (media-grant-admission-
 * end), the refresh checks the new grant once more after following it, so the connection closes at once (docs/media.md:
 * revoking its grant "closes it at once"), not at the 15 s sweep (which never runs here: the clock stands still).
 */
let server: TestServer;
let world: TestEnvironment;
const clock = new ManualClock(Date.now());
let ria: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV, clock);
test.before(async () => {
  ({ world } = await mediaWorld(server, 'media-refresh-race', {
    directCalls: { enabled: false },
    spaces: [{ id: 'room', policy: { mode: 'meeting', maxParticipants: 10, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } }],
  }));
  ria = await runtimePerson(server, 'ria-refresh');
  ria.device.now = () => clock.now();
});

test('the new grant is revoked while grant.refresh verifies it: the connection closes 4401 at once', async () => {
  const page = await (await ria.runtime(world)).open();
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(page, 'room'), world.origin);
  const res = await page.pluginGrant('plg_media', { component: 'control', scopes: ALL_MEDIA_SCOPES, context: { scope: 'room' } });
  assert.is(res.status, 201);
  const { grant, grantId } = (await res.json()) as { grant: string; grantId: string };

  const { pluginGrants } = await runtimeServices(server.services);
  const original = pluginGrants.verify.bind(pluginGrants);
  let revoked = false;
  pluginGrants.verify = async (token, pluginId) => {
    const verified = await original(token, pluginId);
    if (token === grant && !revoked) {
      revoked = true;
      const del = await fetch(`${server.url}/v1/runtime/plugins/plg_media/grants/${grantId}`, { method: 'DELETE', headers: page.headers() });
      assert.is(del.status, 204);
    }
    return verified;
  };
  try {
    const refreshed = await conn.request('grant.refresh', { grant });
    assert.is(refreshed.ok, true, 'verified live, before its revocation');
    const code = await Promise.race([conn.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 2000))]);
    assert.is(code, MediaCloseCode.grantEnded, `still open 2 s after its new grant was revoked; heard ${JSON.stringify(conn.pushes)}`);
    assert.equal(conn.pushes.find((p) => p.type === 'session.ended'), { type: 'session.ended', reason: 'grant_ended' });
  } finally {
    pluginGrants.verify = original;
  }
});

test.run();
