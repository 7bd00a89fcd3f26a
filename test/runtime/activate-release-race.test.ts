import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { productParts } from '../../server/main.js';
import { interceptSends } from '../support/host.js';
import { runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Activation racing release. A released session must never take the lease (the spec's table: released is an
 * end; activate accepts standby and superseded sessions), so it must never evict the person's other live Runtime:
 * the two end as one of their serial orders would.
 */
let server: TestServer;
const clock = new ManualClock(Date.now());
let env: TestEnvironment;
let erin: RuntimePerson;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_EVICTIONS_PER_MINUTE: '1000' }, clock);
test.before(async () => {
  erin = await runtimePerson(server, 'erin');
  env = await testEnvironment(server.opsUrl, 'erins-world', 'erin');
});

test('deterministic interleaving: activation checked the session, then release completes, then the lease is acquired', async () => {
  const b = await (await erin.runtime(env)).open(); // the person's live Runtime
  const a = await erin.runtime(env);
  await a.createSession(); // standby
  assert.is(await sessionState(b), 'active');

  // Hold a's lease.acquire (sent after the activation has checked the session is live) until the release of the same
  // session has committed. Nothing else is changed: this is just an ordering that network and disk latency allow.
  let releaseCommitted!: () => void;
  const released = new Promise<void>((resolve) => (releaseCommitted = resolve));
  let acquireHeld!: () => void;
  const acquireArrived = new Promise<void>((resolve) => (acquireHeld = resolve));
  const restore = interceptSends(server.services.host, (kind, key, event, next) => {
    if (kind === 'runtime-lease' && event.type === 'lease.acquire' && event.sessionId === a.sessionId) {
      acquireHeld();
      return released.then(() => next());
    }
    const reply = next();
    if (kind === 'runtime-session' && key === a.sessionId && event.type === 'session.release') void reply.then(() => releaseCommitted());
    return reply;
  });
  try {
    const activation = a.activate();
    await acquireArrived;
    const release = await a.release();
    assert.is(release.status, 200);
    assert.is(((await release.json()) as { status: string }).status, 'released');
    const activated = await activation;
    const body = (await activated.json()) as { status?: string; code?: string };
    // Expected: the released session is refused (409 runtime_session_ended) and b keeps the lease.
    assert.is.not(activated.status === 200 && body.status === 'active', true, `a released session was activated: ${activated.status} ${JSON.stringify(body)}`);
  } finally {
    restore();
  }
  assert.is(await sessionState(a), 'ended');
  assert.is(await sessionState(b), 'active', 'the live Runtime b was evicted by the activation of a released session');
  const holder = await server.services.host.readCommitted('runtime-lease', erin.accountId);
  assert.is.not((holder?.state as { context: { holder: { sessionId: string } | null } }).context.holder?.sessionId, a.sessionId, 'the released session holds the lease');
});

test('plain HTTP race: release and activate of one session sent together end as one of the two serial orders would', async () => {
  const outcomes: string[] = [];
  for (let round = 0; round < 10; round++) {
    const b = await (await erin.runtime(env)).open();
    const a = await erin.runtime(env);
    await a.createSession();
    const [, activated] = await Promise.all([a.release(), a.activate()]);
    const bState = await sessionState(b);
    outcomes.push(`activate ${activated.status} a=${await sessionState(a)} b=${bState}`);
    await b.release();
  }
  // Either the activation took the lease before the release freed it (200: B was evicted by a real activation, then
  // A ended) or the release came first (409 runtime_session_ended: B keeps its lease). Never an eviction by an
  // activation that was refused, and never A still active.
  const allowed = new Set(['activate 200 a=ended b=superseded', 'activate 409 a=ended b=active']);
  const bad = outcomes.filter((o) => !allowed.has(o));
  assert.equal(bad, [], `outcomes no serial order of release and activate explains:\n${outcomes.join('\n')}`);
});

test.run();
