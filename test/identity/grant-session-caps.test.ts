import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { DeviceClient } from '../../client/device-client.js';
import { LIVE_SESSION_CAPS } from '../../identity/live-session-caps.js';
import { DESKTOP_SESSION_TTL_S } from '../../identity/oauth-grants.js';
import { HOST_CAPABILITY_TTL_MS } from '../../identity/reviewer-authorities.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { assertProblem, enrolAnother, enrolFirst, makeReviewer as makeReviewerOf } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Live desktop management sessions and review host capabilities per account are capped
 * (identity/live-session-caps.ts), through HTTP against the real server, racing creations included.
 */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());

withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);

type Person = { device: DeviceClient; accountId: string };
const people = new Map<string, Person>();
const person = (handle: string): Person => people.get(handle)!;
// Enrolled before any test moves the server's clock (enrolment signs with the real one).
test.before(async () => {
  for (const handle of ['lea', 'max', 'ned', 'ola', 'pia', 'quinn']) {
    const enrolled = await enrolFirst(server.url, handle);
    enrolled.device.now = () => clock.now();
    people.set(handle, enrolled);
  }
  nedSpare = await enrolAnother(server.url, 'ned', person('ned').device, 'ned spare');
});
let nedSpare: DeviceClient;

const desktop = (device: DeviceClient): Promise<Response> => device.request(server.url, 'POST', '/v1/account/desktop-management-sessions', {});

async function desktopSession(device: DeviceClient): Promise<{ sessionId: string; accessToken: string }> {
  const res = await desktop(device);
  assert.is(res.status, 201, await res.clone().text());
  return (await res.json()) as { sessionId: string; accessToken: string };
}

async function liveGrants(accountId: string, kind: 'desktop'): Promise<number> {
  const rows = await db.connection.db
    .selectFrom('oauth_grants')
    .select('id')
    .where('account_id', '=', accountId)
    .where('kind', '=', kind)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', new Date(clock.now()))
    .execute();
  return rows.length;
}

test('desktop management sessions: the one past the cap is refused 429 with Retry-After; revoked and expired ones free places; another account is unaffected', async () => {
  const cap = LIVE_SESSION_CAPS.desktop;
  const lea = person('lea');
  const max = person('max');
  const sessions = [];
  for (let i = 0; i < cap; i++) {
    sessions.push(await desktopSession(lea.device));
    clock.advance(1000);
  }
  const over = await desktop(lea.device);
  await assertProblem(over.clone(), 429, 'desktop_management_session_quota_exceeded');
  const retryAfter = Number(over.headers.get('retry-after'));
  assert.ok(retryAfter > 0 && retryAfter <= DESKTOP_SESSION_TTL_S - cap + 1, `Retry-After names when the oldest ends: ${retryAfter}`);
  assert.is(await liveGrants(lea.accountId, 'desktop'), cap);
  // The live ones still work; the refusal ended nothing.
  assert.is((await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${sessions[0]!.accessToken}` } }).then((r) => r.json()) as { authenticated: boolean }).authenticated, true);
  // Another account is not held back by Lea's.
  await desktopSession(max.device);

  // A revoked one frees its place.
  assert.is((await lea.device.request(server.url, 'DELETE', `/v1/account/desktop-management-sessions/${sessions[0]!.sessionId}`)).status, 200);
  await desktopSession(lea.device);
  await assertProblem(await desktop(lea.device), 429, 'desktop_management_session_quota_exceeded');
  // Expired ones do not count.
  clock.advance(DESKTOP_SESSION_TTL_S * 1000);
  for (let i = 0; i < cap; i++) await desktopSession(lea.device);
  assert.is(await liveGrants(lea.accountId, 'desktop'), cap);
});

test('desktop management sessions: racing creations at the cap: exactly the cap are made, the rest refused', async () => {
  const cap = LIVE_SESSION_CAPS.desktop;
  const ned = person('ned');
  for (let i = 0; i < cap - 2; i++) await desktopSession(ned.device);
  const raced = await Promise.all(Array.from({ length: 8 }, () => desktop(ned.device)));
  const statuses = raced.map((r) => r.status).sort();
  assert.equal(statuses, [201, 201, 429, 429, 429, 429, 429, 429]);
  assert.is(await liveGrants(ned.accountId, 'desktop'), cap);
  // Sessions of an older account epoch no longer work and do not count: removing a device frees the cap.
  assert.is((await ned.device.request(server.url, 'DELETE', `/v1/account/devices/${nedSpare.deviceId}`)).status, 200);
  await desktopSession(ned.device);
});

const makeReviewer = (handle: string): Promise<void> => makeReviewerOf(server, handle, person(handle).device, person(handle).accountId);

const issue = (device: DeviceClient): Promise<Response> => device.request(server.url, 'POST', '/v1/review/host-capabilities', {});

async function capability(device: DeviceClient): Promise<{ capabilityId: string; capability: string }> {
  const res = await issue(device);
  assert.is(res.status, 201, await res.clone().text());
  return (await res.json()) as { capabilityId: string; capability: string };
}

async function liveCapabilities(accountId: string): Promise<number> {
  const rows = await db.connection.db
    .selectFrom('review_host_capabilities')
    .select('id')
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', new Date(clock.now()))
    .execute();
  return rows.length;
}

test('review host capabilities: the one past the cap is refused 429 with Retry-After; released and expired ones free places; another account is unaffected', async () => {
  const cap = LIVE_SESSION_CAPS.reviewCapability;
  const pia = person('pia');
  await makeReviewer('pia');
  await makeReviewer('quinn');
  const issued = [];
  for (let i = 0; i < cap; i++) issued.push(await capability(pia.device));
  const over = await issue(pia.device);
  await assertProblem(over.clone(), 429, 'review_host_capability_quota_exceeded');
  const retryAfter = Number(over.headers.get('retry-after'));
  assert.ok(retryAfter > 0 && retryAfter <= HOST_CAPABILITY_TTL_MS / 1000, `Retry-After: ${retryAfter}`);
  assert.is(await liveCapabilities(pia.accountId), cap);
  await capability(person('quinn').device);

  // Released through its own route: its place is free.
  const first = issued[0]!;
  const released = await pia.device.request(server.url, 'DELETE', `/v1/review/host-capabilities/${first.capabilityId}`, undefined, {
    bindBody: true,
    headers: { 'platform-review-capability': first.capability },
  });
  assert.is(released.status, 204, await released.text());
  await capability(pia.device);
  await assertProblem(await issue(pia.device), 429, 'review_host_capability_quota_exceeded');
  // Expired ones do not count.
  clock.advance(HOST_CAPABILITY_TTL_MS + 1000);
  for (let i = 0; i < cap; i++) await capability(pia.device);
  assert.is(await liveCapabilities(pia.accountId), cap);
});

test('review host capabilities: racing issuances at the cap: exactly the cap are live, the rest refused', async () => {
  const cap = LIVE_SESSION_CAPS.reviewCapability;
  const quinn = person('quinn');
  clock.advance(HOST_CAPABILITY_TTL_MS + 1000);
  for (let i = 0; i < cap - 3; i++) await capability(quinn.device);
  const statuses = (await Promise.all(Array.from({ length: 9 }, () => issue(quinn.device)))).map((r) => r.status).sort();
  assert.equal(statuses, [201, 201, 201, 429, 429, 429, 429, 429, 429]);
  assert.is(await liveCapabilities(quinn.accountId), cap);
});

test.run();
