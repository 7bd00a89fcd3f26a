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

// A restarted guard reloads each id with its own expiry (to the second), not its group commit's latest: otherwise an
// id sharing a group with another device's assertion (iat up to 59 s ahead) counted against its device's share for up
// to a minute too long, and Retry-After was reckoned from that.
test("after a restart a device is refused only while its own ids are inside their window, not another device's", async () => {
  const clock = new ManualClock(Date.parse('2026-12-01T10:00:00Z'));
  const limits = { total: 100, perDevice: 3 };
  const uses = new AssertionUses(db.connection);
  const before = await ReplayGuard.open(clock, uses, limits);
  const now = clock.now();
  // Two uses go out on their own (two statements in flight); the rest share the next group commit: one id of a device
  // whose clock runs 59 s ahead (iat + 60 s = now + 119 s) and three of dev_busy (now + 60 s).
  const admitted = await Promise.all([
    before.firstUse(`dev_filler:${jti(1)}`, now + 60_000),
    before.firstUse(`dev_filler:${jti(2)}`, now + 60_000),
    before.firstUse(`dev_ahead:${jti(1)}`, now + 119_000),
    before.firstUse(`dev_busy:${jti(1)}`, now + 60_000),
    before.firstUse(`dev_busy:${jti(2)}`, now + 60_000),
    before.firstUse(`dev_busy:${jti(3)}`, now + 60_000),
  ]);
  assert.ok(admitted.every(Boolean));
  // The server restarts a second later.
  clock.advance(1_000);
  const after = await ReplayGuard.open(clock, uses, limits);
  let refused: HttpError | undefined;
  try {
    await after.firstUse(`dev_busy:${jti(4)}`, clock.now() + 60_000);
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    refused = error;
  }
  assert.is(refused?.headers['retry-after'], '59', `Retry-After: dev_busy's earliest id leaves its window in 59 s (got ${refused?.headers['retry-after']})`);
  // Past dev_busy's own window (now + 60 s): it holds no id inside its window, so it is served.
  clock.advance(60_000);
  let outcome: string;
  try {
    outcome = String(await after.firstUse(`dev_busy:${jti(5)}`, clock.now() + 60_000));
  } catch (error) {
    outcome = `${(error as HttpError).status} ${(error as HttpError).code}, Retry-After ${(error as HttpError).headers['retry-after']}`;
  }
  assert.is(outcome, 'true', 'dev_busy, with none of its ids inside their window, was refused');
});

test.run();
