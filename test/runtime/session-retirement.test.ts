import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { ActorRetirement } from '../../storage/postgres/actor-retirement.js';
import type { TestDatabase } from '../support/database.js';
import { assertProblem } from '../support/identity.js';
import { LONG_LEASE_ENV, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * Ended Runtime sessions are retired ACTOR_ENDED_RETENTION_DAYS after their end (the server sweeps every ten minutes;
 * the test runs the same retirement with a cutoff past every end). Through HTTP: an ended session answers 409
 * `runtime_session_ended` until then and 404 `runtime_session_not_found` after; the person's live session is untouched.
 * Actors leave memory after 300 ms idle here, so the retired one is read from storage again.
 */
let db: TestDatabase;
let server: TestServer;
let rita: RuntimePerson;
let world: TestEnvironment;

withTestServer(test, (started) => ({ db, server } = started), productParts, { ...LONG_LEASE_ENV, ACTOR_PASSIVATE_AFTER_MS: '300' });
test.before(async () => {
  rita = await runtimePerson(server, 'rita');
  world = await testEnvironment(server.opsUrl, 'retire-world', 'rita');
});

const storedEnd = async (sessionId: string) =>
  (await db.connection.db.selectFrom('actor_snapshots').select('ended_at').where('kind', '=', 'runtime-session').where('key', '=', sessionId).executeTakeFirst())
    ?.ended_at;

test('a released session is retired: 409 runtime_session_ended before, 404 runtime_session_not_found after; the live one stays', async () => {
  const kept = await (await rita.runtime(world)).open();
  const gone = await rita.runtime(world);
  assert.is((await gone.createSession()).status, 201);
  assert.is(await storedEnd(gone.sessionId!), null);
  assert.is((await gone.release()).status, 200);
  assert.ok(await storedEnd(gone.sessionId!), 'the release stored the end');
  assert.is(await sessionState(gone), 'ended');

  // Not yet due: nothing goes.
  const retirement = new ActorRetirement(db.connection.db);
  assert.is(await retirement.pass(Date.now() - 24 * 3600_000), 0);
  assert.is(await sessionState(gone), 'ended');

  assert.is(await retirement.pass(Date.now() + 1), 1);
  await waitFor(async () => (await gone.read()).status === 404, 'the retired session to leave memory and read as missing');
  await assertProblem(await gone.read(), 404, 'runtime_session_not_found');
  await assertProblem(await gone.activate(), 404, 'runtime_session_not_found');
  assert.is(await storedEnd(gone.sessionId!), undefined);

  assert.is(await sessionState(kept), 'active');
  assert.is(await storedEnd(kept.sessionId!), null);
});

test.run();
