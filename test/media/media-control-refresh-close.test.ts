import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { runtimeServices } from '../../runtime/runtime.feature.js';
import { productParts } from '../../server/main.js';
import { configureMedia, mediaGrant, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { runtimePerson, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * A Media control connection that closes while its `grant.refresh` is being verified must not leave anything behind:
 * the socket's onClose has already dropped the connection's subscriptions and expiry timer, so the refresh finishing
 * afterwards must not subscribe it again.
 */
let server: TestServer;
let world: TestEnvironment;
let page: RuntimeClient;

/** Subscriptions made and not yet undone, per kind, counted on the server's own RuntimeActivity and PluginGrants. */
const live = { session: 0, account: 0, revocation: 0 };
/** Grant tokens whose verification by the server's PluginGrants has finished. */
const verified = new Set<string>();

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  const lia = await runtimePerson(server, 'listener-lia');
  world = await testEnvironment(server.opsUrl, 'media-refresh', 'listener-lia');
  await configureMedia(server.opsUrl, world.environmentId, {
    directCalls: { enabled: true },
    spaces: [{ id: 'town-hall', policy: { mode: 'meeting', maxParticipants: 150, maxSpeakerSeats: 4, floorControl: 'open', raiseHand: 'disabled', screenShare: 'speakers', guestPolicy: 'account_required', encryption: 'transport', reconnectGraceSeconds: 30 } }],
  });
  page = await (await lia.runtime(world)).open();
  // Count, without changing them, the subscriptions the control socket makes (spies on the real services).
  const { activity, pluginGrants } = await runtimeServices(server.services);
  const counted = <A extends unknown[]>(kind: keyof typeof live, add: (...args: A) => () => void) => (...args: A): (() => void) => {
    const undo = add(...args);
    live[kind] += 1;
    let undone = false;
    return () => {
      if (!undone) live[kind] -= 1;
      undone = true;
      undo();
    };
  };
  activity.subscribe = counted('session', activity.subscribe.bind(activity));
  activity.subscribeAccount = counted('account', activity.subscribeAccount.bind(activity));
  pluginGrants.onRevoked = counted('revocation', pluginGrants.onRevoked.bind(pluginGrants));
  const verify = pluginGrants.verify.bind(pluginGrants);
  pluginGrants.verify = async (...args: Parameters<typeof verify>) => {
    try {
      return await verify(...args);
    } finally {
      verified.add(args[0]);
    }
  };
});

test('a connection that closes while its grant.refresh is verified leaves no subscription behind', async () => {
  const grant = await mediaGrant(page, 'town-hall');
  const fresh = await mediaGrant(page, 'town-hall');
  // A bare client: `grant.refresh` and the close frame leave back to back, as a page unloading mid-refresh would.
  const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/v1/plugins/media/control`, ['registry.v1.json', `registry.bearer.${grant}`], { headers: { origin: world.origin } });
  await new Promise<void>((resolve, reject) => {
    ws.once('message', () => resolve()); // hello
    ws.once('error', reject);
  });
  assert.equal(live, { session: 1, account: 1, revocation: 1 }, 'the open connection follows its session, account and grant');
  ws.send(JSON.stringify({ type: 'grant.refresh', id: 'r1', grant: fresh }));
  ws.close(1000);
  await new Promise((resolve) => ws.once('close', resolve));
  // The server has seen the close (onClose undid the subscriptions) and the refresh's verification has finished (what
  // the socket does with it follows in the same turn); waited for, not a fixed second.
  await waitFor(() => verified.has(fresh) && live.session + live.account + live.revocation === 0, 'the close and the refresh\'s verification').catch(() => undefined);
  assert.ok(verified.has(fresh), 'the refresh was verified');
  assert.equal(live, { session: 0, account: 0, revocation: 0 }, 'subscriptions of a closed connection are still registered');

  // And an ordinary connection still works afterwards.
  const again = await MediaControlClient.connect(server.url, fresh, world.origin);
  assert.is((await again.request('ping')).ok, true);
  again.close();
  await again.closed;
  await waitFor(() => live.session === 0, 'the second connection to unsubscribe');
});

test.run();
