import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { productParts } from '../../server/main.js';
import type { TestDatabase } from '../support/database.js';
import { LONG_LEASE_ENV, runtimePerson, testEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * The server itself retires ended actors ACTOR_ENDED_RETENTION_DAYS after their end (README, Configuration; docs/decisions.md,
 * Retirement of ended actors: every ten minutes, the first run a minute after start), and removes journal segments
 * their snapshot covers ACTOR_JOURNAL_RETENTION_DAYS after their events (Journal retention: a minute after start,
 * then a cycle). The passes are tested on their own elsewhere; this is the schedules and the settings reaching them.
 * It waits for the first runs: about a minute.
 */
const DAY_MS = 24 * 3600_000;
const clock = new ManualClock(Date.now());
let db: TestDatabase;
let server: TestServer;

withTestServer(test, (started) => ({ db, server } = started), productParts, { ...LONG_LEASE_ENV, ACTOR_ENDED_RETENTION_DAYS: '2', ACTOR_JOURNAL_RETENTION_DAYS: '1' }, clock);

let accountId: string;
/** The account actor's journal segments (first versions), and the version its stored snapshot covers. */
const accountJournal = async (): Promise<{ versions: number[]; snapshotVersion: number }> => {
  const rows = await db.connection.db.selectFrom('actor_journal').select('version').where('kind', '=', 'account').where('key', '=', accountId).orderBy('version').execute();
  const snapshot = await db.connection.db.selectFrom('actor_snapshots').select('version').where('kind', '=', 'account').where('key', '=', accountId).executeTakeFirstOrThrow();
  return { versions: rows.map((r) => Number(r.version)), snapshotVersion: Number(snapshot.version) };
};
let journalBefore: { versions: number[]; snapshotVersion: number };

const stored = async (sessionId: string): Promise<boolean> =>
  (await db.connection.db.selectFrom('actor_snapshots').select('key').where('kind', '=', 'runtime-session').where('key', '=', sessionId).executeTakeFirst()) !== undefined;

test('a session ended longer ago than ACTOR_ENDED_RETENTION_DAYS is removed by the scheduled sweep; one ended since stays', async () => {
  const startedAt = performance.now();
  const rex = await runtimePerson(server, 'rex');
  rex.device.now = () => clock.now();
  accountId = rex.accountId;
  const world = await testEnvironment(server.opsUrl, 'retention-world', 'rex');

  const old = await rex.runtime(world);
  assert.is((await old.createSession()).status, 201);
  assert.is((await old.release()).status, 200);
  clock.advance(2 * DAY_MS);
  // Signed in afresh (the registry page session is 12 h): a session that ends two days after the first.
  assert.is((await rex.browser.openPageSession()).status, 204);
  const recent = await rex.runtime(world);
  assert.is((await recent.createSession()).status, 201);
  assert.is((await recent.release()).status, 200);
  clock.advance(DAY_MS);
  assert.ok(await stored(old.sessionId!), 'nothing is removed before the first run');
  journalBefore = await accountJournal();

  await waitFor(async () => ((await stored(old.sessionId!)) ? undefined : true), 'the first scheduled run to retire the old session', 90_000);
  assert.ok(performance.now() - startedAt > 30_000, 'not at start: the first run comes a minute after it');
  assert.ok(await stored(recent.sessionId!), 'a session ended a day ago stays (ACTOR_ENDED_RETENTION_DAYS=2)');
});

test('segments the snapshot covers, older than ACTOR_JOURNAL_RETENTION_DAYS, are removed by the scheduled sweep; the newest stays', async () => {
  const covered = journalBefore.versions.filter((v, i, all) => v <= journalBefore.snapshotVersion && i < all.length - 1);
  assert.ok(covered.length > 0, `the enrolment left covered segments: ${JSON.stringify(journalBefore)}`);
  const after = await waitFor(async () => {
    const now = await accountJournal();
    return now.versions.some((v) => covered.includes(v)) ? undefined : now;
  }, 'the journal sweep to remove the covered segments', 60_000);
  assert.equal(after.versions, journalBefore.versions.filter((v) => !covered.includes(v)));
  assert.ok(after.versions.length >= 1, 'the newest segment stays');
});

test.run();
