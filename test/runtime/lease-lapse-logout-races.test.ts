import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { RegistryBrowser } from '../../client/oidc-client.js';
import { environmentSignIn, RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { interceptSends } from '../support/host.js';
import { logoutBrowser, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/** Lease lapse timing vs the documentation, lapse racing activation, browser logout racing activation. */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let ivy: RuntimePerson;
const LEASE_TTL_S = 90;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_LEASE_TTL_SECONDS: String(LEASE_TTL_S), RUNTIME_EVICTIONS_PER_MINUTE: '1000', ACTOR_TIMER_POLL_MS: '1000' }, clock);
test.before(async () => {
  ivy = await runtimePerson(server, 'ivy');
  ivy.device.now = () => clock.now();
  env = await testEnvironment(server.opsUrl, 'ivys-world', 'ivy');
});

const fencedCall = (page: RuntimeClient) => page.fenced('/v1/runtime/plugins/plg_media/settings');
/** The committed durable timers of ivy's lease actor (its lapse deadline), through the operator listener. */
const leaseTimers = async (): Promise<string> => {
  const detail = (await (await fetch(`${server.opsUrl}/actors/runtime-lease/${ivy.accountId}`)).json()) as { persisted: { timers: unknown } | null };
  return JSON.stringify(detail.persisted?.timers);
};

test('documented lapse: a fenced call after a third of the TTL renews; the lease then holds 90 s from that call', async () => {
  const page = await (await ivy.runtime(env)).open();
  clock.advance(40_000);
  const timersBefore = await leaseTimers();
  const renewing = await fencedCall(page);
  assert.ok(renewing.status !== 409, `fenced call refused: ${renewing.status} ${await renewing.text()}`);
  // The renewal is fire-and-forget: wait until it is committed (the lease's stored deadline moved), not a fixed 200 ms.
  await waitFor(async () => (await leaseTimers()) !== timersBefore, 'the renewal to be committed');
  clock.advance(80_000); // 120 s after activation, 80 s after the renewing call
  await new Promise((r) => setTimeout(r, 1500));
  assert.is(await sessionState(page), 'active', 'renewed 80 s ago: the lease must hold');
  clock.advance(12_000); // 92 s after the last renewal
  await waitFor(async () => ((await sessionState(page)) === 'standby' ? true : undefined), 'the lease to lapse');
  await page.release();
});

test('lapse racing re-activation of the same session: one holder, versions grow, the session ends active', async () => {
  const page = await (await ivy.runtime(env)).open();
  const before = page.lease!.leaseVersion;
  clock.advance(LEASE_TTL_S * 1000 + 1);
  const activated = await page.activate();
  assert.is(activated.status, 200);
  await new Promise((r) => setTimeout(r, 1500));
  assert.is(await sessionState(page), 'active');
  assert.ok(page.lease!.leaseVersion >= before);
  await page.release();
});

test('browser SSO logout racing activation: a revoked session never takes the lease from the live Runtime', async () => {
  // b: a page opened from a second browser of the same person; it is not correlated with the first browser's logout.
  const second = new RegistryBrowser(server.url, ivy.device);
  assert.is((await second.openPageSession()).status, 204);
  const b = new RuntimeClient(server.url, (await environmentSignIn(server.url, second, env.clientId, env.redirectUri)).access_token, env.origin);
  await b.open();
  const a = await ivy.runtime(env); // first browser
  await a.createSession();

  let revoked!: () => void;
  const revokeCommitted = new Promise<void>((resolve) => (revoked = resolve));
  let arrived!: () => void;
  const acquireArrived = new Promise<void>((resolve) => (arrived = resolve));
  const restore = interceptSends(server.services.host, (kind, key, event, next) => {
    if (kind === 'runtime-lease' && event.type === 'lease.acquire' && event.sessionId === a.sessionId) {
      arrived();
      return revokeCommitted.then(() => next());
    }
    const reply = next();
    if (kind === 'runtime-session' && key === a.sessionId && event.type === 'session.revoke') void reply.then(() => revoked());
    return reply;
  });
  let activated: Response;
  try {
    const activation = a.activate();
    await acquireArrived;
    const logout = await logoutBrowser(server.url, ivy);
    assert.ok(logout.status < 300, `logout ${logout.status}`);
    activated = await activation;
  } finally {
    restore();
  }
  const body = (await activated.json()) as { status?: string };
  assert.is(await sessionState(b), 'active', `the other browser's live Runtime was evicted by a revoked session (activate answered ${activated.status} ${body.status})`);
});

test.run();
