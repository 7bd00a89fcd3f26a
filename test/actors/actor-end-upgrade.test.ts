import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sql, type Kysely } from 'kysely';
import { initialTransition, type AnyStateMachine } from 'xstate';
import { systemClock } from '../../actors/clock.js';
import { identityKinds } from '../../actors/identity.actors.js';
import { mediaRoomKind } from '../../actors/media.actors.js';
import { newId } from '../../identity/ids.js';
import { accountMachine } from '../../machines/account/account.machine.js';
import { accountHandleMachine } from '../../machines/account-handle/account-handle.machine.js';
import { mediaRoomMachine } from '../../machines/media-room/media-room.machine.js';
import * as wake from '../../storage/migrations/0030-wake-ended-actors-without-end.js';
import { ActorRetirement } from '../../storage/postgres/actor-retirement.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { hostFor, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/**
 * Accounts abandoned, handles freed and Media rooms emptied before their ends were recorded (`abandonedAt`, `freedAt`,
 * `emptySince`) were kept for ever: no row said they had ended. Version 2 of their kinds records the end from the row's
 * stored time, migration 0029 makes the poller load them, and the activation stores the end: retirement then removes
 * them. What the journal after the snapshot brought back to life stays.
 */
let db: TestDatabase;
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ db, store } = opened));

const DAY_MS = 24 * 3600_000;
const storedAt = Date.parse('2026-01-02T03:04:05.678Z');

/** A snapshot in `value` with `context` as the build before the end field stored it, written `storedAt`, then `tail`. */
async function storedTheOldWay(
  kind: string,
  key: string,
  machine: AnyStateMachine,
  value: string,
  context: Record<string, unknown>,
  tail: readonly Record<string, unknown>[] = [],
): Promise<void> {
  const snapshot = machine.getPersistedSnapshot(machine.resolveState({ value, context })) as unknown as { context: Record<string, unknown> };
  for (const field of ['abandonedAt', 'freedAt', 'emptySince']) assert.is(field in snapshot.context, false);
  const at = storedAt - DAY_MS;
  await store.commit([{ kind, key, baseVersion: 0, epoch: 1, journal: [{ version: 1, event: { type: 'older', at }, at }], snapshot: { version: 1, snapshot, timers: {} } }]);
  await sql`UPDATE actor_snapshots SET updated_at = ${new Date(storedAt)} WHERE kind = ${kind} AND key = ${key}`.execute(db.connection.db);
  if (tail.length > 0) {
    const events = tail.map((event, i) => ({ version: i + 2, event: { ...event, at: storedAt + 1_000 }, at: storedAt + 1_000 }));
    await store.commit([{ kind, key, baseVersion: 1, epoch: 1, journal: events }]);
  }
}

const endOf = async (kind: string, key: string): Promise<Date | null | undefined> =>
  (await db.connection.db.selectFrom('actor_snapshots').select('ended_at').where('kind', '=', kind).where('key', '=', key).executeTakeFirst())?.ended_at;

test('an account abandoned, a handle freed and a room emptied before their ends were kept are loaded, given their end, and retired', async () => {
  const account = newId('acc');
  const [unopened] = initialTransition(accountMachine);
  await storedTheOldWay('account', account, accountMachine, 'abandoned', { ...unopened.context, handle: 'ghost' });
  await storedTheOldWay('account-handle', 'ghost', accountHandleMachine, 'free', { accountId: null, reservedUntil: null });
  // Freed, then reserved again by an event journaled after the snapshot: it lives.
  await storedTheOldWay('account-handle', 'taken', accountHandleMachine, 'free', { accountId: null, reservedUntil: null }, [
    { type: 'handle.reserve', accountId: account, expiresAt: Date.now() + DAY_MS },
  ]);
  const room = `${newId('env').replace('_', '-')}.standup`;
  const { emptySince: _, ...emptyRoom } = initialTransition(mediaRoomMachine, { roomId: room, scope: 'standup' })[0].context;
  await storedTheOldWay('media-room', room, mediaRoomMachine, 'open', emptyRoom);
  await wake.up(db.connection.db as unknown as Kysely<unknown>);

  const host = hostFor(store, systemClock, [...identityKinds, mediaRoomKind(() => {})], { timerPollMs: 50 });
  host.start();
  try {
    const ended = [['account', account], ['account-handle', 'ghost'], ['media-room', room]] as const;
    for (const [kind, key] of ended) {
      const end = await waitFor(async () => (await endOf(kind, key)) ?? undefined, `${kind} to record its end`);
      assert.equal(end, new Date(storedAt), `${kind} ends when its row was stored`);
    }
    assert.equal((await store.load('account-handle', 'ghost'))?.timers, {}, 'the wake timer is gone, so the poller leaves it');
    await waitFor(async () => (await store.load('account-handle', 'taken'))?.timers.reservation !== undefined, 'the reserved handle to store its timers');
    assert.is(await endOf('account-handle', 'taken'), null, 'reserved again after the snapshot: no end');
  } finally {
    await host.drain();
  }
  assert.is(await new ActorRetirement(db.connection.db).pass(storedAt + 30 * DAY_MS), 3);
  for (const kind of ['account', 'account-handle', 'media-room']) {
    assert.equal((await db.connection.db.selectFrom('actor_snapshots').select('key').where('kind', '=', kind).execute()).map((r) => r.key), kind === 'account-handle' ? ['taken'] : []);
  }
});

test('0029 wakes only what ended without a recorded end', async () => {
  const account = newId('acc');
  const [unopened] = initialTransition(accountMachine);
  await storedTheOldWay('account', account, accountMachine, 'enrolling', { ...unopened.context, handle: 'live' });
  await storedTheOldWay('account-handle', 'bound', accountHandleMachine, 'bound', { accountId: account, reservedUntil: null });
  await wake.up(db.connection.db as unknown as Kysely<unknown>);
  assert.equal((await store.load('account', account))?.timers, {});
  assert.equal((await store.load('account-handle', 'bound'))?.timers, {});
});

test.run();
