import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assign, setup } from 'xstate';
import { defineActorKind } from '../../actors/actor-kind.js';
import { ManualClock } from '../../actors/clock.js';
import type { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import { hostFor, withActorStore } from '../support/host.js';
import { waitFor } from '../support/wait.js';

/** A live actor with a recurring durable timer must not keep one record per timer it ever fired. */
let store: PostgresActorStore;
withActorStore(test, (opened) => ({ store } = opened));

const tickerMachine = setup({
  types: { context: {} as { next: number | null; ticks: number }, events: {} as { type: 'start'; at: number } | { type: 'timer.due'; name: string; dueAt: number; at: number } },
}).createMachine({
  context: { next: null, ticks: 0 },
  on: {
    start: { actions: assign({ next: ({ event }) => event.at + 1_000 }) },
    'timer.due': { actions: assign({ next: ({ event }) => event.at + 1_000, ticks: ({ context }) => context.ticks + 1 }) },
  },
});
const tickerKind = defineActorKind({
  name: 'ticker',
  machine: tickerMachine,
  key: { pattern: /^[a-z]+$/, describe: 'letters' },
  timers: (s): Record<string, number> => (s.context.next === null ? {} : { heartbeat: s.context.next }),
});

/** Counts "(concatenated string)" nodes (how V8 names a string built by concatenation, like `${name}@${dueAt}`). */
async function consStrings(): Promise<number> {
  const file = path.join(tmpdir(), `fired-timers-${process.pid}.heapsnapshot`);
  v8.writeHeapSnapshot(file);
  const snap = JSON.parse(await readFile(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  await rm(file, { force: true });
  const fields = snap.snapshot.meta.node_fields.length;
  const typeAt = snap.snapshot.meta.node_fields.indexOf('type');
  const cons = snap.snapshot.meta.node_types[0].indexOf('concatenated string');
  let n = 0;
  for (let i = 0; i < snap.nodes.length; i += fields) if (snap.nodes[i + typeAt] === cons) n++;
  return n;
}

test('fired-timer bookkeeping of a live actor stays bounded', async () => {
  const clock = new ManualClock();
  const host = hostFor(store, clock, [tickerKind], { passivateAfterMs: 3_600_000 });
  await host.send('ticker', 'tock', { type: 'start' });
  let ticks = 0;
  const run = async (n: number) => {
    for (let i = 0; i < n; i++) {
      clock.advance(1_000);
      ticks++;
      if (ticks % 100 === 0) await waitFor(() => host.inspect('ticker', 'tock')!.committedVersion === ticks + 1 || undefined, `tick ${ticks}`);
    }
  };
  await run(500);
  const before = await consStrings();
  await run(2_000);
  const after = await consStrings();
  assert.is(host.inspect('ticker', 'tock')!.committedVersion, 2_501);
  await host.drain();
  assert.ok(after - before < 200, `${after - before} more concatenated strings retained after 2000 more ticks (${before} -> ${after})`);
});

test.run();
