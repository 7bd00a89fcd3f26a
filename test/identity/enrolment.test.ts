import { createHash } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { DeviceClient } from '../../client/device-client.js';
import { AssertionUses } from '../../identity/assertion-uses.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { jsonOf } from '../support/http.js';
import { assertProblem, enrolFirst, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/** Device plane through HTTP: enrolment, device assertions, devices, passports. Refusals first. */
let db: TestDatabase;
let server: TestServer;
// The server's clock starts at real time (assertions carry real time) and is moved by hand for expiry.
const clock = new ManualClock(Date.now());
const now = (): number => Math.floor(clock.now() / 1000);

const lifecycle = withTestServer(test, (started) => ({ db, server } = started), productParts, {}, clock);

async function introspect(passport: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.url}/v1/auth/passports/introspect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ passport }) });
  return jsonOf(res);
}

async function complete(device: DeviceClient, started: Record<string, string>): Promise<Response> {
  return device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });
}

test('start refuses a key that is not a public P-256 point, a private key, and a bad handle', async () => {
  const device = await DeviceClient.generate('x');
  const post = (body: unknown) =>
    fetch(`${server.url}/v1/enrol/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const offCurve = { ...device.publicJwk, y: device.publicJwk.x };
  await assertProblem(await post({ handle: 'alice', device: { name: 'a', publicKey: offCurve } }), 400, 'device_key_invalid');
  await assertProblem(await post({ handle: 'alice', device: { name: 'a', publicKey: { ...device.publicJwk, d: 'secret' } } }), 400, 'validation_failed');
  await assertProblem(await post({ handle: 'A!', device: { name: 'a', publicKey: device.publicJwk } }), 400, 'validation_failed');
});

test('device assertions: missing, bearer instead, unknown device, forged, replayed, expired, other path, other body', async () => {
  const device = await DeviceClient.generate('phone');
  const started = await startEnrolment(server.url, 'bob', device);
  const body = JSON.stringify({ enrolmentId: started.enrolmentId, nonce: started.nonce });
  const send = (assertion: string | undefined, sentBody = body, path = '/v1/enrol/complete', extra: Record<string, string> = {}) =>
    fetch(server.url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(assertion ? { 'platform-device-assertion': assertion } : {}), ...extra },
      body: sentBody,
    });
  await assertProblem(await send(undefined), 401, 'device_assertion_required');
  await assertProblem(await send(undefined, body, '/v1/enrol/complete', { authorization: 'Bearer project-token' }), 401, 'device_assertion_required');
  await assertProblem(await send('not.a.jws'), 401, 'device_assertion_invalid');
  const stranger = await DeviceClient.generate('stranger');
  await assertProblem(
    await send(await stranger.assertion({ method: 'POST', target: '/v1/enrol/complete', body, bindBody: true, deviceId: 'dev_00000000000000000000000000' })),
    401,
    'device_unknown',
  );
  // Signed by another key, under the enrolling device's id.
  await assertProblem(
    await send(await stranger.assertion({ method: 'POST', target: '/v1/enrol/complete', body, bindBody: true, deviceId: device.deviceId! })),
    401,
    'device_assertion_invalid',
  );
  // Correctly signed by the device, but not an assertion: refused, never read as one.
  for (const rawPayload of ['null', '42', '"text"', '[1]', '{"htm":']) {
    await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete', rawPayload })), 401, 'device_assertion_invalid');
  }
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete', body, bindBody: true, issuedAt: now() - 120 })), 401, 'device_assertion_expired');
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete', body, bindBody: true, issuedAt: now() + 120 })), 401, 'device_assertion_expired');
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete', body, bindBody: true, issuedAt: now() + 0.5 })), 401, 'device_assertion_invalid');
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/pending', body, bindBody: true })), 401, 'device_assertion_mismatch');
  // The method and the query are bound as well as the path.
  await assertProblem(await send(await device.assertion({ method: 'PUT', target: '/v1/enrol/complete', body, bindBody: true })), 401, 'device_assertion_mismatch');
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete?x=1', body, bindBody: true })), 401, 'device_assertion_mismatch');
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete', body: '{"other":1}', bindBody: true })), 401, 'device_assertion_body_mismatch');
  await assertProblem(await send(await device.assertion({ method: 'POST', target: '/v1/enrol/complete' })), 401, 'device_assertion_body_mismatch');
  // Made 59 s ago, so the end of its window is at most a second away.
  const iat = now() - 59;
  const good = await device.assertion({ method: 'POST', target: '/v1/enrol/complete', body, bindBody: true, issuedAt: iat });
  assert.is((await send(good)).status, 201);
  await assertProblem(await send(good), 401, 'device_assertion_replayed');
  // The first instant its id is no longer remembered is already outside the window: refused, never accepted again.
  clock.advance(iat * 1000 + 60_000 - clock.now());
  await assertProblem(await send(good), 401, 'device_assertion_expired');
});

test('an assertion used before a restart is still refused after it, and expired ids are swept', async () => {
  const { device } = await enrolFirst(server.url, 'rita');
  const used = await device.assertion({ method: 'GET', target: '/v1/account/devices' });
  const list = () => fetch(`${server.url}/v1/account/devices`, { headers: { 'platform-device-assertion': used } });
  assert.is((await list()).status, 200);
  await lifecycle.restart();
  await assertProblem(await list(), 401, 'device_assertion_replayed');
  const fresh = await device.request(server.url, 'GET', '/v1/account/devices');
  assert.is(fresh.status, 200, 'a new assertion of the same device passes');

  const uses = new AssertionUses(db.connection);
  const stored = async () => (await uses.unexpired(0)).filter((use) => use.id.startsWith(`${device.deviceId}:`));
  assert.ok((await stored()).length >= 2, 'each accepted id is recorded');
  assert.ok((await uses.sweep(clock.now() + 2 * 60_000)) >= 2);
  assert.equal(await stored(), [], 'ids past their time window are swept');
});

test('a device that has not completed enrolment is refused everywhere but completion', async () => {
  const device = await DeviceClient.generate('tablet');
  await startEnrolment(server.url, 'carol', device);
  await assertProblem(await device.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_not_enrolled');
});

test('first device of a new account: possession proof, then a passport verifiable offline with the JWKS', async () => {
  const device = await DeviceClient.generate('dave laptop');
  const started = await startEnrolment(server.url, 'dave', device);
  assert.is(started.proof, 'possession');
  assert.match(started.verificationCode!, /^\d{6}$/);
  await assertProblem(
    await device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: 'x'.repeat(43) }),
    403,
    'enrolment_proof_invalid',
  );
  const res = await complete(device, started);
  assert.is(res.status, 201);
  const body = (await res.json()) as { handle: string; deviceId: string; passport: string };
  assert.is(body.handle, 'dave');
  assert.is(body.deviceId, device.deviceId);
  const jwks = (await (await fetch(`${server.url}/v1/auth/jwks`)).json()) as { keys: [] };
  const { payload, protectedHeader } = await jwtVerify(body.passport, createLocalJWKSet(jwks), { audience: 'registry', currentDate: new Date(clock.now()) });
  assert.is(protectedHeader.typ, 'passport+jwt');
  assert.is(payload.dev, device.deviceId);
  assert.is(payload.aep, 1);
  assert.match(String(payload.sub), /^acc_/);
  // Completing again (a fresh assertion), as a client whose answer was lost would: answered again, same device.
  const again = await complete(device, started);
  assert.is(again.status, 201, await again.clone().text());
  const repeated = (await again.json()) as { deviceId: string; passport: string };
  assert.is(repeated.deviceId, device.deviceId);
  assert.is((await jwtVerify(repeated.passport, createLocalJWKSet(jwks), { audience: 'registry', currentDate: new Date(clock.now()) })).payload.aep, 1);
  await assertProblem(
    await device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: 'x'.repeat(43) }, { bindBody: true }),
    403,
    'enrolment_proof_invalid',
  );
});

test('a handle being enrolled is not available to someone else', async () => {
  await startEnrolment(server.url, 'erin', await DeviceClient.generate('erin 1'));
  const other = await DeviceClient.generate('not erin');
  const res = await fetch(`${server.url}/v1/enrol/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handle: 'erin', device: { name: 'x', publicKey: other.publicJwk } }),
  });
  await assertProblem(res, 409, 'handle_unavailable');
});

test('a further device waits for an enrolled device: pending, admitted, enrolled; refused stays out', async () => {
  const { device: first } = await enrolFirst(server.url, 'frank');
  const second = await DeviceClient.generate('frank phone');
  const startedSecond = await startEnrolment(server.url, 'frank', second);
  assert.is(startedSecond.proof, 'approval');
  await assertProblem(await complete(second, startedSecond), 409, 'enrolment_pending');

  const pending = (await (await first.request(server.url, 'GET', '/v1/enrol/pending')).json()) as {
    pending: Array<{ enrolmentId: string; deviceName: string; verificationCode: string }>;
  };
  assert.is(pending.pending.length, 1);
  assert.is(pending.pending[0]!.deviceName, 'frank phone');
  assert.is(pending.pending[0]!.verificationCode, startedSecond.verificationCode, 'both devices show the same code');
  // A pending device cannot approve itself.
  await assertProblem(await second.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: startedSecond.enrolmentId, decision: 'admit' }), 401, 'device_not_enrolled');
  assert.is((await first.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: startedSecond.enrolmentId, decision: 'admit' })).status, 204);
  await assertProblem(await first.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: startedSecond.enrolmentId, decision: 'refuse' }), 409, 'enrolment_already_decided');
  const done = await complete(second, startedSecond);
  assert.is(done.status, 201);
  assert.is((((await done.json()) as { passport: string }).passport.split('.').length), 3);
  // Completed is still decided: a late decision is told so, not that the enrolment never existed.
  await assertProblem(await first.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: startedSecond.enrolmentId, decision: 'refuse' }), 409, 'enrolment_already_decided');

  const third = await DeviceClient.generate('unknown laptop');
  const startedThird = await startEnrolment(server.url, 'frank', third);
  assert.is((await first.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: startedThird.enrolmentId, decision: 'refuse' })).status, 204);
  await assertProblem(await complete(third, startedThird), 403, 'enrolment_refused');

  const list = (await (await second.request(server.url, 'GET', '/v1/account/devices')).json()) as { devices: Array<{ deviceId: string; current: boolean }> };
  assert.equal(list.devices.map((d) => d.deviceId).sort(), [first.deviceId, second.deviceId].sort());
  assert.equal(list.devices.find((d) => d.current)?.deviceId, second.deviceId);
});

test('a stranger filling the approval list cannot keep the owner\'s new device off it', async () => {
  const { device: owner } = await enrolFirst(server.url, 'ivan');
  const flood = async (n: number) => {
    for (let i = 0; i < n; i++) await startEnrolment(server.url, 'ivan', await DeviceClient.generate(`stranger ${i}`), '127.0.0.9');
  };
  await flood(6);
  const phone = await DeviceClient.generate('ivan phone');
  const started = await startEnrolment(server.url, 'ivan', phone);
  await flood(6);
  const pending = (await (await owner.request(server.url, 'GET', '/v1/enrol/pending')).json()) as { pending: Array<{ enrolmentId: string; deviceName: string }> };
  assert.is(pending.pending.length, 5, 'the list stays bounded');
  assert.ok(pending.pending.some((p) => p.enrolmentId === started.enrolmentId), 'the flood displaced only its own requests');
  assert.is((await owner.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: started.enrolmentId, decision: 'admit' })).status, 204);
  assert.is((await complete(phone, started)).status, 201);
});

test('removing a device ends it at once; revoke-all keeps only the caller; the last device may not sign out', async () => {
  const { device: a } = await enrolFirst(server.url, 'gina');
  const others: Array<{ device: DeviceClient; started: Record<string, string>; passport: string }> = [];
  for (const name of ['b', 'c', 'd']) {
    const d = await DeviceClient.generate(name);
    const s = await startEnrolment(server.url, 'gina', d);
    assert.is((await a.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: s.enrolmentId, decision: 'admit' })).status, 204);
    const done = await complete(d, s);
    assert.is(done.status, 201);
    others.push({ device: d, started: s, passport: ((await done.json()) as { passport: string }).passport });
  }
  const [b, c, d] = others.map((o) => o.device) as [DeviceClient, DeviceClient, DeviceClient];
  const kept = others[1]!;
  await assertProblem(await a.request(server.url, 'DELETE', '/v1/account/devices/dev_00000000000000000000000000'), 404, 'device_not_found');
  // Another device's completion is not this one's to repeat.
  await assertProblem(await complete(b, kept.started), 404, 'enrolment_not_found');
  assert.is((await a.request(server.url, 'DELETE', `/v1/account/devices/${b.deviceId}`)).status, 200);
  await assertProblem(await b.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_removed');
  await assertProblem(await complete(b, others[0]!.started), 401, 'device_removed');
  // The epoch rose: the kept device's passport is stale online until it repeats its completion.
  assert.equal(await introspect(kept.passport), { active: false, reason: 'account_epoch_stale' });
  const renewed = await complete(c, kept.started);
  assert.is(renewed.status, 201, await renewed.clone().text());
  assert.equal(await introspect(((await renewed.json()) as { passport: string }).passport), { active: true });

  assert.is((await c.request(server.url, 'POST', '/v1/account/devices/revoke-all')).status, 200);
  await assertProblem(await a.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_removed');
  await assertProblem(await d.request(server.url, 'GET', '/v1/account/devices'), 401, 'device_removed');
  const left = (await (await c.request(server.url, 'GET', '/v1/account/devices')).json()) as { devices: Array<{ deviceId: string }> };
  assert.equal(left.devices.map((x) => x.deviceId), [c.deviceId]);

  // The last device may not leave (nothing could admit another); test/identity/last-device.test.ts signs out one of two.
  await assertProblem(await c.request(server.url, 'POST', '/v1/account/sign-out'), 409, 'last_device');
});

test('a completion whose handle binding was lost binds it when retried, even after the reservation lapsed', async () => {
  const device = await DeviceClient.generate('zed laptop');
  device.now = () => clock.now();
  const started = await startEnrolment(server.url, 'zed', device);
  const host = server.services.host;
  const handle = async () => (await host.send('account-handle', 'zed', { type: 'handle.read' })).snapshot.context as { accountId: string | null; reservedUntil: number | null };
  const accountId = (await handle()).accountId!;
  // The account's completion commits (its device kept first, as every completion does), and the process dies before
  // the handle is bound.
  const nonceHash = createHash('sha256').update(started.nonce!).digest('base64url');
  await host.send('device', started.deviceId!, { type: 'device.keep', accountId });
  await host.send('account', accountId, { type: 'account.enrolment.complete', enrolmentId: started.enrolmentId!, nonceHash });
  clock.advance(71 * 60_000);
  await waitFor(async () => {
    clock.advance(1_000);
    return (await handle()).accountId === null ? true : undefined;
  }, 'the reservation to lapse');
  const retried = await complete(device, started);
  assert.is(retried.status, 201, await retried.clone().text());
  // Bound again after the lapse left it free: that end is undone.
  assert.equal(await handle(), { accountId, reservedUntil: null, freedAt: null }, 'bound to its account');
  const stranger = await DeviceClient.generate('stranger');
  assert.is((await startEnrolment(server.url, 'zed', stranger)).proof, 'approval', 'the handle stays with its account');
});

test('an enrolment expires after 10 minutes; the handle of an abandoned account is free again', async () => {
  const device = await DeviceClient.generate('slow');
  const started = await startEnrolment(server.url, 'hugo', device);
  clock.advance(11 * 60_000);
  // The clock moved; the device signs with the server's time.
  const late = await device.assertion({
    method: 'POST',
    target: '/v1/enrol/complete',
    body: JSON.stringify({ enrolmentId: started.enrolmentId, nonce: started.nonce }),
    bindBody: true,
    issuedAt: now(),
  });
  const res = await fetch(`${server.url}/v1/enrol/complete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'platform-device-assertion': late },
    body: JSON.stringify({ enrolmentId: started.enrolmentId, nonce: started.nonce }),
  });
  assert.ok(res.status === 401 || res.status === 404, `got ${res.status}`);
  // Abandoned by its timer, which the poller delivers asynchronously (time keeps moving while we wait, as it would
  // for real): the account can never complete, so its handle does not wait out the reservation's margin.
  const host = server.services.host;
  const accountId = ((await host.send('account-handle', 'hugo', { type: 'handle.read' })).snapshot.context as { accountId: string }).accountId;
  await waitFor(async () => {
    clock.advance(1_000);
    return (await host.send('account', accountId, { type: 'account.read' })).snapshot.value === 'abandoned' ? true : undefined;
  }, 'the account to be abandoned');
  assert.ok(clock.now() < Date.parse(started.expiresAt!) + 30 * 60_000, 'well inside the margin');
  const again = await DeviceClient.generate('hugo again');
  const released = await waitFor(async () => {
    clock.advance(1_000);
    const res = await fetch(`${server.url}/v1/enrol/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ handle: 'hugo', device: { name: 'x', publicKey: again.publicJwk } }),
    });
    return res.status === 201 ? ((await res.json()) as { proof: string }) : undefined;
  }, 'the handle to be released');
  assert.is(released.proof, 'possession', 'a new account can take the handle');
});

test('enrolment starts are rate limited per client address, before any work', async () => {
  const device = await DeviceClient.generate('flood');
  const post = (i: number) =>
    fetch(`${server.url}/v1/enrol/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ handle: `flood${i}`, device: { name: 'x', publicKey: device.publicJwk } }),
    });
  let limited: Response | undefined;
  for (let i = 0; i < 25 && !limited; i++) {
    const res = await post(i);
    if (res.status === 429) limited = res;
    else assert.is(res.status, 201);
  }
  assert.ok(limited, 'a burst beyond 20 is refused');
  assert.ok(Number(limited.headers.get('retry-after')) >= 1);
  await assertProblem(limited, 429, 'rate_limited');
  clock.advance(60_000);
  assert.is((await post(99)).status, 201, 'the bucket refills with time');
});

test.run();
