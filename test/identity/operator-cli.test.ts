import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizationUrl, pkcePair } from '../../client/oidc-client.js';
import { productParts } from '../../server/main.js';
import { enrolFirst } from '../support/identity.js';
import { runRegistryAdmin } from '../support/process.js';
import { withTestServer, type TestServer } from '../support/server.js';

/** The operators' command line, run as its own process against a real server's operator listener. */
const OPS_TOKEN = 'ops-token-for-the-cli-test';
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), productParts, { OPS_TOKEN });
test.before(async () => {
  await enrolFirst(server.url, 'olivia');
});

const admin = (args: string[], env: Record<string, string> = { OPS_TOKEN }) => runRegistryAdmin(server.opsUrl, 'ops-olga', args, env);

const register = ['environment', 'register', '--id', 'conference', '--origin', 'https://conference.example', '--redirect-uri', 'https://conference.example/auth/callback'];

test('refusals: no operator token, a usage error, an unknown owner, an origin that is not https, a redirect URI on another origin', async () => {
  const noToken = await admin(['accounts', 'list'], {});
  assert.is(noToken.code, 1);
  assert.match(noToken.stderr, /operator_token_invalid/);
  const usage = await admin(['environment', 'register', '--origin', 'https://x.example']);
  assert.is(usage.code, 2);
  assert.match(usage.stderr, /--id is required/);
  const unknownOwner = await admin([...register, '--owner', 'nobody']);
  assert.is(unknownOwner.code, 1);
  assert.match(unknownOwner.stderr, /account_not_found/);
  const plainHttp = await admin(['environment', 'register', '--id', 'bad-origin', '--origin', 'http://bad.example', '--owner', 'olivia', '--redirect-uri', 'http://bad.example/cb']);
  assert.match(plainHttp.stderr, /validation_failed[\s\S]*\/origin/);
  const foreign = await admin(['environment', 'register', '--id', 'bad-redirect', '--origin', 'https://good.example', '--owner', 'olivia', '--redirect-uri', 'https://evil.example/cb']);
  assert.match(foreign.stderr, /validation_failed[\s\S]*\/redirectUris\/0/);
});

test('registers an Environment whose client the authorization endpoint then knows; a second registration is refused', async () => {
  const done = await admin([...register, '--owner', 'olivia', '--name', 'Conference']);
  assert.is(done.code, 0, done.stderr);
  const out = JSON.parse(done.stdout) as { environment: { environmentId: string; origin: string }; client: { clientId: string } };
  assert.is(out.environment.origin, 'https://conference.example');
  const page = await fetch(
    authorizationUrl(server.url, { clientId: out.client.clientId, redirectUri: 'https://conference.example/auth/callback', challenge: pkcePair().challenge }),
    { redirect: 'manual' },
  );
  assert.is(page.status, 401, 'a known client and redirect URI reach the sign-in page');
  const again = await admin([...register, '--owner', 'olivia']);
  assert.match(again.stderr, /environment_exists/);
  const list = JSON.parse((await admin(['environment', 'list'])).stdout) as { environments: Array<{ environmentId: string }> };
  assert.equal(list.environments.map((e) => e.environmentId), ['conference']);
  const audit = JSON.parse((await admin(['audit', 'list', '--target', 'environment:conference'])).stdout) as { events: Array<{ action: string; actor: string }> };
  assert.equal(audit.events.map((e) => [e.action, e.actor]), [['environment.register', 'operator:ops-olga']]);
});

test('grants platform admin with the same audit record as the API; lists accounts and devices', async () => {
  const missing = await admin(['admin', 'grant', '--handle', 'nobody', '--reason', 'testing']);
  assert.match(missing.stderr, /account_not_found/);
  const first = JSON.parse((await admin(['admin', 'grant', '--handle', 'olivia', '--reason', 'first administrator'])).stdout) as { changed: boolean; accountId: string };
  assert.is(first.changed, true);
  const second = JSON.parse((await admin(['admin', 'grant', '--handle', 'olivia', '--reason', 'again'])).stdout) as { changed: boolean };
  assert.is(second.changed, false);
  const audit = JSON.parse((await admin(['audit', 'list', '--target', `account:${first.accountId}`])).stdout) as { events: Array<{ action: string; actor: string; reason: string }> };
  assert.equal(audit.events.map((e) => [e.action, e.actor, e.reason]), [['platform.admin.grant', 'operator:ops-olga', 'first administrator']]);
  const accounts = JSON.parse((await admin(['accounts', 'list'])).stdout) as { accounts: Array<{ handle: string; platformAdmin: boolean; activeDevices: number }> };
  assert.equal(accounts.accounts.map((a) => [a.handle, a.platformAdmin, a.activeDevices]), [['olivia', true, 1]]);
  const devices = JSON.parse((await admin(['devices', 'list', '--handle', 'olivia'])).stdout) as { devices: Array<{ name: string; status: string }> };
  assert.equal(devices.devices.map((d) => [d.name, d.status]), [['olivia laptop', 'active']]);
});

test('accounts come a page at a time (limit, after → next), so listing them never loads every account at once', async () => {
  for (const handle of ['paula', 'quentin']) await enrolFirst(server.url, handle);
  const page = async (query: string): Promise<{ status: number; body: { accounts?: Array<{ accountId: string; handle: string }>; next?: string; error?: { code: string } } }> => {
    const res = await fetch(`${server.opsUrl}/registry/accounts${query}`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } });
    return { status: res.status, body: (await res.json()) as never };
  };
  const whole = await page('');
  assert.is(whole.status, 200);
  const ids = whole.body.accounts!.map((a) => a.accountId);
  assert.is(ids.length, 3);
  assert.equal(ids, [...ids].sort(), 'in account id order');
  assert.is(whole.body.next, undefined, 'one page holds them all: no next');
  const first = await page('?limit=2');
  assert.equal(first.body.accounts!.map((a) => a.accountId), ids.slice(0, 2));
  assert.is(first.body.next, ids[1]);
  const second = await page(`?limit=2&after=${encodeURIComponent(first.body.next!)}`);
  assert.equal(second.body.accounts!.map((a) => a.accountId), ids.slice(2));
  assert.is(second.body.next, undefined);
  for (const bad of ['?limit=0', '?limit=1001', '?limit=x']) {
    const refused = await page(bad);
    assert.equal([refused.status, refused.body.error?.code], [400, 'validation_failed'], bad);
  }
  // The command line follows the pages.
  const listed = JSON.parse((await admin(['accounts', 'list'])).stdout) as { accounts: Array<{ accountId: string }> };
  assert.equal(listed.accounts.map((a) => a.accountId), ids);
});

test.run();
