import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { AssertionUses } from '../../identity/assertion-uses.js';
import { ReplayGuard } from '../../identity/device-assertion.js';
import { HttpError } from '../../transport/http/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A restarted guard reloads each id with its own expiry (to the second), not its group commit's latest: otherwise an id
 * sharing a group with another device's assertion (iat up to 59 s ahead) counted against its device's share for up to
 * a minute too long, and Retry-After was reckoned from that.
 */
let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after(async () => {
  await db.drop();
});

const jti = (i: number): string => `jti-${String(i).padStart(16, '0')}`;

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
