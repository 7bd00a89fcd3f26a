import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RuntimeClient } from '../../client/runtime-client.js';
import { MediaEnvironmentConfigV2Schema } from '../../plugins/media/media-config.schema.js';
import { checkMediaEnvironmentConfig } from '../../plugins/media/media-policy.check.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import type { TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { DEFAULT_DIRECT_CALL_POLICY } from '../../media/media.feature.js';

/**
 * The Media service applies its cross-field policy check (checkMediaEnvironmentConfig) to the configuration it runs
 * on: a room whose definition breaks it (a space's policy, the direct-call policy, a duplicated space id) is not
 * opened, `policy_invalid`.
 */
let server: TestServer;
let world: TestEnvironment;
let modPage: RuntimeClient;

// Not https and not loopback: backendEndpoint() refuses it, so the check reports role_authority_url_invalid.
const BAD_AUTHORITY = 'http://backend.policy-world.example/media/authority';

const meeting = (overrides: Record<string, unknown> = {}) => ({
  mode: 'meeting',
  maxParticipants: 8,
  maxSpeakerSeats: 8,
  floorControl: 'moderated',
  raiseHand: 'enabled',
  screenShare: 'speakers',
  guestPolicy: 'account_required',
  encryption: 'transport',
  reconnectGraceSeconds: 30,
  ...overrides,
});

const configuration = {
  spaces: [
    { id: 'lobby', policy: meeting() },
    // The same id again, with another policy: which one is "lobby"?
    { id: 'lobby', policy: meeting({ maxParticipants: 4, maxSpeakerSeats: 2, guestPolicy: 'allowed' }) },
    { id: 'bad-authority', policy: meeting({ roleAuthorityUrl: BAD_AUTHORITY }) },
  ],
  directCalls: {
    enabled: true,
    policy: { ...DEFAULT_DIRECT_CALL_POLICY, roleAuthorityUrl: BAD_AUTHORITY },
  },
};

withTestServer(test, (started) => ({ server } = started), productParts, MEDIA_TEST_ENV);
test.before(async () => {
  ({ world, modPage } = await mediaWorld(server, 'policy-world', configuration));
});

async function join(scope: string): Promise<{ ok: boolean; code: string | undefined }> {
  const conn = await MediaControlClient.connect(server.url, await mediaGrant(modPage, scope), world.origin);
  try {
    const joined = await conn.request('room.join', { rtpCapabilities: {} });
    return { ok: joined.ok, code: joined.error?.code };
  } finally {
    conn.close();
    await conn.closed;
  }
}

test('precondition: the stored configuration is what the service check refuses, at these pointers', async () => {
  const res = await fetch(`${server.opsUrl}/registry/environments/${world.environmentId}/plugins/plg_media/configuration`, { headers: { 'x-operator-name': 'test-operator' } });
  const stored = MediaEnvironmentConfigV2Schema.parse((await jsonOf(res)).configuration);
  assert.equal(
    checkMediaEnvironmentConfig(stored).map((v) => [v.pointer, v.code]),
    [
      ['/spaces/1/id', 'space_id_duplicate'],
      ['/spaces/2/policy/roleAuthorityUrl', 'role_authority_url_invalid'],
      ['/directCalls/policy/roleAuthorityUrl', 'role_authority_url_invalid'],
    ],
  );
});

test('control: a space whose own policy fails the check is refused with policy_invalid', async () => {
  assert.equal(await join('bad-authority'), { ok: false, code: 'policy_invalid' });
});

test('a direct call whose policy fails the check (role_authority_url_invalid) is refused like a space', async () => {
  assert.equal(await join('call:policy-1'), { ok: false, code: 'policy_invalid' }, 'the direct-call policy is never checked');
});

test('a space id defined twice (space_id_duplicate) is refused, not silently resolved to the first definition', async () => {
  assert.equal(await join('lobby'), { ok: false, code: 'policy_invalid' }, 'the duplicate id is never checked');
});

test.run();
