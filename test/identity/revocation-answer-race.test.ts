import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { cliSignIn, RegistryBrowser } from '../../client/oidc-client.js';
import { CLI_CLIENT_ID } from '../../identity/environments.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Revoking a session that is already revoked answers the same: its `revokedAt` is the time stored with it. Revocations
 * sent together must say so too: each that found the session live and lost the race to another one answered its own
 * clock reading, a time stored nowhere, so two answers to "revoke this session" named two different times.
 */
let db: TestDatabase;
let server: TestServer;
let device: DeviceClient;
withTestServer(test, (started) => ({ db, server } = started), productParts);
test.before(async () => {
  ({ device } = await enrolFirst(server.url, 'rita'));
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function revokedAtOf(responses: Response[]): Promise<string[]> {
  return Promise.all(
    responses.map(async (res) => {
      assert.is(res.status, 200, await res.clone().text());
      return ((await res.json()) as { revokedAt: string }).revokedAt;
    }),
  );
}

test('desktop management sessions revoked by racing requests: every answer names the stored revocation time', async () => {
  for (let round = 0; round < 20; round++) {
    const created = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
    const { sessionId } = (await created.json()) as { sessionId: string };
    const answers = await revokedAtOf(await Promise.all(Array.from({ length: 8 }, () => device.request(server.url, 'DELETE', `/v1/account/desktop-management-sessions/${sessionId}`))));
    const stored = await db.connection.db.selectFrom('oauth_grants').select('revoked_at').where('id', '=', sessionId).executeTakeFirstOrThrow();
    const expected = stored.revoked_at!.toISOString();
    assert.equal(answers, answers.map(() => expected), `round ${round}: stored ${expected}, answered ${answers.join(', ')}`);
  }
});

test('CLI sign-ins revoked by racing requests: every answer names the stored revocation time', async () => {
  const desktop = await device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});
  const { accessToken } = (await desktop.json()) as { accessToken: string };
  for (let round = 0; round < 20; round++) {
    const browser = new RegistryBrowser(server.url, device);
    assert.is((await browser.openPageSession()).status, 204);
    const tokens = await cliSignIn(server.url, CLI_CLIENT_ID, async (url) => {
      const { location } = await browser.authorize(url);
      await fetch(location!);
    });
    const listed = await fetch(`${server.url}/v1/auth/management-sessions`, { headers: bearer(tokens.access_token) });
    const { sessions } = (await listed.json()) as { sessions: Array<{ sessionId: string; current: boolean }> };
    const sessionId = sessions.find((s) => s.current)!.sessionId;
    const answers = await revokedAtOf(
      await Promise.all(Array.from({ length: 8 }, () => fetch(`${server.url}/v1/auth/management-sessions/${sessionId}`, { method: 'DELETE', headers: bearer(accessToken) }))),
    );
    const stored = await db.connection.db.selectFrom('oauth_grants').select('revoked_at').where('id', '=', sessionId).executeTakeFirstOrThrow();
    const expected = stored.revoked_at!.toISOString();
    assert.equal(answers, answers.map(() => expected), `round ${round}: stored ${expected}, answered ${answers.join(', ')}`);
  }
});

test.run();
