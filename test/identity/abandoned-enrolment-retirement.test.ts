import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { DeviceClient } from '../../client/device-client.js';
import { ENROLMENT_TTL_MS } from '../../identity/accounts.js';
import { productParts } from '../../server/main.js';
import { ActorRetirement } from '../../storage/postgres/actor-retirement.js';
import type { TestDatabase } from '../support/database.js';
import { assertProblem, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * An unauthenticated `POST /v1/enrol/start` makes an account, a device and a handle actor. When that enrolment is never
 * completed, each of them ends (the account when it is abandoned, the device at its enrolment's deadline, the handle
 * when its reservation lapses) and is retired ACTOR_ENDED_RETENTION_DAYS later (the test runs the server's retirement
 * with a cutoff past every end), so a client with many addresses cannot grow storage for good. What is retired loads
 * as never written, and that must mean the same: the handle is free, the old enrolment never completes, its device
 * never verifies. Completed enrolments, their accounts, devices and bound handles, never end. Actors leave memory
 * after 300 ms idle here, so retired ones are read from storage again.
 */
let db: TestDatabase;
let server: TestServer;
const clock = new ManualClock(Date.now());
withTestServer(test, (started) => ({ db, server } = started), productParts, { ACTOR_PASSIVATE_AFTER_MS: '300', ACTOR_TIMER_POLL_MS: '50' }, clock);

const RESERVATION_MARGIN_MS = 60 * 60_000;

async function stored(kind: string, key: string): Promise<{ endedAt: Date | null; journal: number } | undefined> {
  const row = await db.connection.db.selectFrom('actor_snapshots').select('ended_at').where('kind', '=', kind).where('key', '=', key).executeTakeFirst();
  const journal = await db.connection.db
    .selectFrom('actor_journal')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('kind', '=', kind)
    .where('key', '=', key)
    .executeTakeFirstOrThrow();
  return row === undefined && Number(journal.n) === 0 ? undefined : { endedAt: row?.ended_at ?? null, journal: Number(journal.n) };
}

/** Moves time on (the timer poller delivers deadlines on its own schedule) until every actor named has ended. */
async function untilEnded(actors: ReadonlyArray<readonly [string, string]>, what: string): Promise<void> {
  await waitFor(async () => {
    clock.advance(1_000);
    for (const [kind, key] of actors) if (!(await stored(kind, key))?.endedAt) return undefined;
    return true;
  }, what);
}

async function holderOf(handle: string): Promise<string | null> {
  return ((await server.services.host.send('account-handle', handle, { type: 'handle.read' })).snapshot.context as { accountId: string | null }).accountId;
}

const completion = (device: DeviceClient, started: Record<string, string>): Promise<Response> =>
  device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce }, { bindBody: true });

async function timedDevice(name: string): Promise<DeviceClient> {
  const device = await DeviceClient.generate(name);
  device.now = () => clock.now();
  return device;
}

test('a first enrolment never completed: account, device and handle end and are retired; the handle starts afresh, the old one never completes', async () => {
  const first = await timedDevice('ghost');
  const started = await startEnrolment(server.url, 'ghost', first);
  const accountId = (await holderOf('ghost'))!;
  const actors = [['account', accountId], ['device', started.deviceId!], ['account-handle', 'ghost']] as const;
  for (const [kind, key] of actors) assert.is((await stored(kind, key))?.endedAt, null, `${kind} lives while its enrolment runs`);

  // Past the enrolment and the handle reservation's margin: each ends by its own deadline.
  clock.advance(ENROLMENT_TTL_MS + RESERVATION_MARGIN_MS);
  await untilEnded(actors, 'the account, device and handle to end');

  const retirement = new ActorRetirement(db.connection.db);
  assert.is(await retirement.pass(clock.now() - 24 * 3600_000), 0, 'not yet due');
  assert.ok((await retirement.pass(clock.now() + 1)) >= 3);
  for (const [kind, key] of actors) assert.is(await stored(kind, key), undefined, `${kind} retired, snapshot and journal`);

  // An ended actor leaves memory its idle time after its last commit, reads or not: then it loads as never written.
  const host = server.services.host;
  await waitFor(() => {
    clock.advance(100);
    return actors.every(([kind, key]) => host.inspect(kind, key) === undefined);
  }, 'the retired actors to leave memory');
  // The old device's late completion: its id names nothing any more, and nothing is written back.
  await assertProblem(await completion(first, started), 401, 'device_unknown');
  const late = await host.send('account', accountId, { type: 'account.enrolment.complete', enrolmentId: started.enrolmentId!, nonceHash: 'x' });
  assert.equal([late.emitted, late.snapshot.value], [[], 'unopened'], 'a retired account accepts no completion');
  assert.is(await stored('account', accountId), undefined);
  assert.is(await stored('device', started.deviceId!), undefined);

  const again = await timedDevice('ghost again');
  const restarted = await startEnrolment(server.url, 'ghost', again);
  assert.is(restarted.proof, 'possession', 'a new account takes the free handle');
  assert.is((await completion(again, restarted)).status, 201);
  assert.is((await stored('account-handle', 'ghost'))?.endedAt, null, 'a bound handle lives');
});

test("an enrolment lapsed by someone else's: the old account and device end and go; the new account, its device and handle stay", async () => {
  const first = await timedDevice('first');
  const lapsed = await startEnrolment(server.url, 'taken', first);
  const oldAccount = (await holderOf('taken'))!;
  clock.advance(ENROLMENT_TTL_MS + 1);
  const second = await timedDevice('second');
  const started = await startEnrolment(server.url, 'taken', second);
  assert.is(started.proof, 'possession');
  const newAccount = (await holderOf('taken'))!;
  assert.is.not(newAccount, oldAccount);
  assert.is((await completion(second, started)).status, 201);

  // Past the new enrolment's deadline too: a completed one never ends by it.
  clock.advance(ENROLMENT_TTL_MS + RESERVATION_MARGIN_MS);
  await untilEnded([['account', oldAccount], ['device', lapsed.deviceId!]], 'the lapsed account and its device to end');
  const retirement = new ActorRetirement(db.connection.db);
  await retirement.pass(clock.now() + 1);
  assert.is(await stored('account', oldAccount), undefined);
  assert.is(await stored('device', lapsed.deviceId!), undefined);
  for (const [kind, key] of [['account', newAccount], ['device', started.deviceId!], ['account-handle', 'taken']] as const) {
    assert.is((await stored(kind, key))?.endedAt, null, `${kind} of the completed enrolment lives`);
  }
  await waitFor(async () => {
    clock.advance(100);
    return (await completion(first, lapsed)).status === 401;
  }, 'the retired actors to leave memory');
  await assertProblem(await completion(first, lapsed), 401, 'device_unknown');
  const renewed = await completion(second, started);
  assert.is(renewed.status, 201, 'the enrolled device still verifies and renews');
});

test("a further device's request nobody decided: its device ends and goes, the account stays and its devices verify", async () => {
  const owner = await timedDevice('olga laptop');
  const opened = await startEnrolment(server.url, 'olga', owner);
  const accountId = (await holderOf('olga'))!;
  assert.is((await completion(owner, opened)).status, 201);
  const stranger = await timedDevice('stranger');
  const asked = await startEnrolment(server.url, 'olga', stranger);
  assert.is(asked.proof, 'approval');
  clock.advance(ENROLMENT_TTL_MS);
  await untilEnded([['device', asked.deviceId!]], 'the undecided device to end');
  assert.is((await stored('account', accountId))?.endedAt, null);

  await new ActorRetirement(db.connection.db).pass(clock.now() + 1);
  assert.is(await stored('device', asked.deviceId!), undefined);
  assert.is((await stored('account', accountId))?.endedAt, null, 'the account stays');
  await waitFor(async () => {
    clock.advance(100);
    return (await completion(stranger, asked)).status === 401;
  }, 'the retired device to leave memory');
  await assertProblem(await completion(stranger, asked), 401, 'device_unknown');
  assert.is((await owner.request(server.url, 'GET', '/v1/enrol/pending')).status, 200, "the owner's device verifies");
});

test('a completion asked in time keeps its device past the deadline, even when the rest of it came late', async () => {
  const device = await timedDevice('slow link');
  const started = await startEnrolment(server.url, 'kept', device);
  const accountId = (await holderOf('kept'))!;
  assert.is((await completion(device, started)).status, 201);
  clock.advance(ENROLMENT_TTL_MS + RESERVATION_MARGIN_MS);
  // Long enough for every deadline the enrolment held to be delivered.
  await waitFor(async () => {
    clock.advance(1_000);
    return (await stored('account-handle', 'kept'))?.endedAt === null && (await holderOf('kept')) === accountId ? true : undefined;
  }, 'the handle to stay bound');
  await new Promise((r) => setTimeout(r, 300));
  await new ActorRetirement(db.connection.db).pass(clock.now() + 1);
  for (const [kind, key] of [['account', accountId], ['device', started.deviceId!], ['account-handle', 'kept']] as const) {
    assert.is((await stored(kind, key))?.endedAt, null, `${kind} of a completed enrolment never ends`);
  }
  assert.is((await completion(device, started)).status, 201);
});

test('a device that lapsed after its account found the completion admissible is not admitted: 404, and the account holds no device', async () => {
  const device = await timedDevice('too late');
  const started = await startEnrolment(server.url, 'lapsing', device);
  const accountId = (await holderOf('lapsing'))!;
  const host = server.services.host;
  // Its deadline delivered to the device first (the account's own check ran just before it, within its lifetime): the
  // account answers the proof admissible, and the keep that must precede the admission meets a lapsed device.
  const dueAt = ((await host.send('device', started.deviceId!, { type: 'device.read' })).snapshot.context as { expiresAt: number }).expiresAt;
  assert.is((await host.send('device', started.deviceId!, { type: 'timer.due', name: 'enrolment', dueAt })).snapshot.value, 'lapsed');
  await assertProblem(await completion(device, started), 404, 'enrolment_not_found');
  const account = await host.send('account', accountId, { type: 'account.read' });
  assert.is(account.snapshot.value, 'enrolling', 'not admitted');
  assert.equal((account.snapshot.context as { devices: Record<string, unknown> }).devices, {});
  assert.is((await host.send('device', started.deviceId!, { type: 'device.read' })).snapshot.value, 'lapsed', 'and not kept either');
});

test.run();
