import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Kysely } from 'kysely';
import { initialTransition } from 'xstate';
import { systemClock } from '../../actors/clock.js';
import { runtimeKinds } from '../../actors/runtime.actors.js';
import { newId } from '../../identity/ids.js';
import { runtimeSessionMachine, type RuntimeSessionContext, type SessionLeaseCheck } from '../../machines/runtime-session/runtime-session.machine.js';
import * as wake from '../../storage/migrations/0029-wake-sessions-without-lease-check.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/**
 * An active Runtime session stored before `leaseCheckAt` existed holds no deadline, so the periodic look at its lease
 * never came: a notice it missed left it active for good. Version 2 of the kind gives it the deadline taking the lease
 * would have set, and migration 0028 makes the poller load such rows, so the look happens without another event.
 */
let db: TestDatabase;
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ db, store } = opened));

const IDLE_TTL_MS = 30 * 60_000;

/** An active session as the build before `leaseCheckAt` stored it: snapshot, journal and timers (none) straight to the store. */
async function storedTheOldWay(sessionId: string, activatedAt: number, context: Partial<RuntimeSessionContext> = {}): Promise<void> {
  const [initial] = initialTransition(runtimeSessionMachine, { sessionId });
  const active = runtimeSessionMachine.resolveState({
    value: 'active',
    context: {
      ...initial.context,
      accountId: newId('acc'),
      actorId: newId('acc'),
      environmentId: newId('env'),
      origin: 'https://env.example',
      createdAt: activatedAt,
      lastActivityAt: activatedAt,
      lease: { leaseId: 'lease-1', version: 1 },
      seenVersion: 1,
      idleTtlMs: IDLE_TTL_MS,
      idleUntil: null,
      ...context,
    },
  });
  const snapshot = runtimeSessionMachine.getPersistedSnapshot(active) as unknown as { context: Record<string, unknown> };
  assert.is('leaseCheckAt' in snapshot.context, false);
  const event = (type: string, at: number) => ({ version: type === 'session.create' ? 1 : 2, event: { type, at }, at });
  await store.commit([{
    kind: 'runtime-session', key: sessionId, baseVersion: 0, epoch: 1,
    journal: [event('session.create', activatedAt), event('session.activated', activatedAt)],
    snapshot: { version: 2, snapshot, timers: {} },
  }]);
}

test('an active session stored without leaseCheckAt is loaded by the poller and looks at its lease, then keeps looking', async () => {
  const sessionId = newId('rts');
  const activatedAt = systemClock.now() - 2 * IDLE_TTL_MS;
  await storedTheOldWay(sessionId, activatedAt);
  // One without an idle period (stored before idle expiry) is left as taking the lease would leave it: no look.
  const ageless = newId('rts');
  await storedTheOldWay(ageless, activatedAt, { idleTtlMs: undefined });
  await wake.up(db.connection.db as unknown as Kysely<unknown>);

  const checks: SessionLeaseCheck[] = [];
  const host = hostFor(store, systemClock, runtimeKinds(() => {}, () => {}, (check) => checks.push(check)), { timerPollMs: 50 });
  host.start();
  try {
    const check = await waitFor(() => checks.find((c) => c.sessionId === sessionId), 'the session to look at its lease');
    assert.equal({ leaseId: check.leaseId, version: check.version }, { leaseId: 'lease-1', version: 1 });
    const stored = await waitFor(async () => {
      const s = await store.load('runtime-session', sessionId);
      return s && s.snapshotVersion === 3 && s;
    }, 'the moved deadline to be stored');
    assert.is(stored.stateVersion, 2, 'written at the kind state version');
    const context = (stored.snapshot as { context: RuntimeSessionContext }).context;
    assert.ok(context.leaseCheckAt! > systemClock.now(), 'the next look is one idle period on');
    assert.equal(stored.timers, { lease_check: context.leaseCheckAt! }, 'the wake timer is gone, the deadline stored');
    assert.is(checks.filter((c) => c.sessionId === ageless).length, 0);
    assert.equal((await store.load('runtime-session', ageless))?.timers, {}, 'not woken: taking the lease gives it no look either');
  } finally {
    await host.drain();
  }
});

test('0028 wakes only active sessions that lack leaseCheckAt', async () => {
  const standby = newId('rts');
  await store.commit([{
    kind: 'runtime-session', key: standby, baseVersion: 0, epoch: 1,
    journal: [{ version: 1, event: { type: 'session.create', at: 1 }, at: 1 }],
    snapshot: { version: 1, snapshot: { status: 'active', value: 'standby', context: { idleTtlMs: IDLE_TTL_MS } }, timers: { idle: 5 } },
  }]);
  const current = newId('rts');
  await store.commit([{
    kind: 'runtime-session', key: current, baseVersion: 0, epoch: 1,
    journal: [{ version: 1, event: { type: 'session.activated', at: 1 }, at: 1 }],
    snapshot: { version: 1, snapshot: { status: 'active', value: 'active', context: { idleTtlMs: IDLE_TTL_MS, leaseCheckAt: 7 } }, timers: { lease_check: 7 } },
  }]);
  await wake.up(db.connection.db as unknown as Kysely<unknown>);
  assert.equal((await store.load('runtime-session', standby))?.timers, { idle: 5 });
  assert.equal((await store.load('runtime-session', current))?.timers, { lease_check: 7 });
});

test.run();
