import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { AssertionUses } from '../../identity/assertion-uses.js';
import { ReplayGuard } from '../../identity/device-assertion.js';
import { HttpError } from '../../transport/http/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The memory of used device-assertion ids (`<deviceId>:<jti>`), on the real durable record: each device may hold a
 * share of it, and only a device past its share is refused, so one busy device cannot lock the others out; the total
 * stays a backstop. An id is kept up to ≈ 120 s (iat may be 59 s ahead, plus the 60 s window). Small limits here; the
 * server's are 6,000 per device and 1,000,000 in all. Each test runs on its own day, so the ids another test left in
 * the record are past their window for it.
 */
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

const jti = (i: number): string => `jti-${String(i).padStart(16, '0')}`;

/** What `firstUse` threw, as status, code and Retry-After; undefined when it did not throw. */
async function refusal(use: Promise<boolean>): Promise<{ status: number; code: string; retryAfter: string | undefined } | undefined> {
  try {
    await use;
    return undefined;
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    return { status: error.status, code: error.code, retryAfter: error.headers['retry-after'] };
  }
}

test("one device's own assertions cannot lock every other device out of the device plane", async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  const guard = await ReplayGuard.open(clock, new AssertionUses(db.connection), { total: 100, perDevice: 10 });
  const expiresAt = clock.now() + 119_000;
  // The attacker signs as many as it can: it gets its share and no more, with a 429 that names itself.
  let admitted = 0;
  let refused: Awaited<ReturnType<typeof refusal>>;
  for (let i = 0; i < 100 && refused === undefined; i++) {
    refused = await refusal(guard.firstUse(`dev_attacker:${jti(i)}`, expiresAt));
    if (refused === undefined) admitted++;
  }
  assert.is(admitted, 10);
  assert.equal(refused, { status: 429, code: 'device_assertion_quota_exceeded', retryAfter: '119' });
  // Every other device is served as before.
  assert.is(await refusal(guard.firstUse(`dev_victim:${jti(1)}`, clock.now() + 60_000)), undefined, 'a device that used none of it was refused');
  assert.ok(await guard.firstUse(`dev_other:${jti(1)}`, clock.now() + 60_000));
});

test('a device over its share: a replay is still told as a replay, Retry-After is when its earliest id leaves the window, and then it is served', async () => {
  const clock = new ManualClock(Date.parse('2026-11-23T10:00:00Z'));
  const guard = await ReplayGuard.open(clock, new AssertionUses(db.connection), { total: 100, perDevice: 3 });
  assert.ok(await guard.firstUse(`dev_busy:${jti(0)}`, clock.now() + 30_500));
  assert.ok(await guard.firstUse(`dev_busy:${jti(1)}`, clock.now() + 90_000));
  assert.ok(await guard.firstUse(`dev_busy:${jti(2)}`, clock.now() + 60_000));
  assert.is(await guard.firstUse(`dev_busy:${jti(1)}`, clock.now() + 90_000), false, 'a replay, not a quota refusal');
  assert.equal(await refusal(guard.firstUse(`dev_busy:${jti(3)}`, clock.now() + 60_000)), { status: 429, code: 'device_assertion_quota_exceeded', retryAfter: '31' });
  clock.advance(10_000);
  assert.equal(await refusal(guard.firstUse(`dev_busy:${jti(4)}`, clock.now() + 60_000)), { status: 429, code: 'device_assertion_quota_exceeded', retryAfter: '21' });
  clock.advance(20_500);
  assert.ok(await guard.firstUse(`dev_busy:${jti(5)}`, clock.now() + 60_000), 'its earliest id left the window: one place is free');
  assert.equal((await refusal(guard.firstUse(`dev_busy:${jti(6)}`, clock.now() + 60_000)))?.code, 'device_assertion_quota_exceeded');
});

test('the total stays a backstop: devices at their share together fill it, and then every device gets 503 replay_guard_full', async () => {
  const clock = new ManualClock(Date.parse('2026-11-24T10:00:00Z'));
  const guard = await ReplayGuard.open(clock, new AssertionUses(db.connection), { total: 30, perDevice: 10 });
  for (const device of ['dev_a', 'dev_b', 'dev_c']) {
    for (let i = 0; i < 10; i++) assert.ok(await guard.firstUse(`${device}:${jti(i)}`, clock.now() + 60_000));
  }
  assert.equal(await refusal(guard.firstUse(`dev_d:${jti(0)}`, clock.now() + 60_000)), { status: 503, code: 'replay_guard_full', retryAfter: '1' });
  clock.advance(60_000);
  assert.ok(await guard.firstUse(`dev_d:${jti(0)}`, clock.now() + 60_000), 'served again once the ids left their window');
});

test('a restarted server reloads each device\'s ids: a device at its share before the restart is still at it after', async () => {
  const clock = new ManualClock(Date.parse('2026-11-25T10:00:00Z'));
  const limits = { total: 100, perDevice: 5 };
  const before = await ReplayGuard.open(clock, new AssertionUses(db.connection), limits);
  for (let i = 0; i < 5; i++) assert.ok(await before.firstUse(`dev_restart:${jti(i)}`, clock.now() + 60_000));
  const after = await ReplayGuard.open(clock, new AssertionUses(db.connection), limits);
  assert.is(await after.firstUse(`dev_restart:${jti(0)}`, clock.now() + 60_000), false);
  assert.equal((await refusal(after.firstUse(`dev_restart:${jti(5)}`, clock.now() + 60_000)))?.code, 'device_assertion_quota_exceeded');
  assert.ok(await after.firstUse(`dev_fresh:${jti(0)}`, clock.now() + 60_000));
});

test.run();
