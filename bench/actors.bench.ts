/**
 * Actor host benchmark: durable events/s and reply latency with 1, 100 and 10,000 actors, each printed beside the raw
 * limit of the same Postgres measured in the same run.
 *
 *   npm run bench:actors               (builds, then runs dist/bench/actors.bench.js; a minute or two: the
 *                                      10,000-actor phase's spreading warm-up alone is ≈ 315,000 events)
 *
 * The npm scripts run it, like `npm start` runs the server, with --max-semi-space-size=32. Every event leaves its
 * actor a new XState snapshot (≈ 0.8 KB with its parts) that outlives the next scavenge, and with 256 events in flight
 * each event's own objects live across a commit (several ms); V8's default 16 MB semi-spaces scavenged about 16 times
 * a second, copying and promoting all of that each time, ≈ 20 % of the host's CPU. 32 MB cut the host's CPU per event
 * by about a quarter; 64 MB saved no more but made each pause longer (13–18 ms against 9–12 ms, straight into p99).
 * The flags in use are printed with the figures.
 *
 * What is measured, per actor count N:
 * - Host: C closed-loop senders (each sends its next event as soon as the previous reply arrives) call
 *   `host.send('tally', key, { type: 'tally.add' })` on uniformly random keys among N (all on the one actor when
 *   N = 1) for a fixed window, after every actor has been activated (loaded from the store), then sent a uniformly
 *   random 0..63 more events (in shuffled order), then a short warm-up. A snapshot row rides along on an activation's
 *   first write and then every 64th event of the actor (policy snapshotEvery), so right after the activation pass all
 *   actors would sit at the start of that cycle and a window of ≈ 15 events per actor (10,000 actors) would store
 *   none; the random extra events spread them over the cycle as a long-running host has them, and the window stores
 *   snapshots at the steady rate (printed: snap/1k ev, from the commit observer). events/s counts replies inside the
 *   window; a reply means the event is committed (in its actor's journal row, fenced, in one statement with the other
 *   actors' writes). rows/s counts the journal rows (one per actor per commit, whatever number of its events the
 *   commit holds) of the commits completed inside the window. Latency is send → reply, p50/p99/max over every event
 *   of the window.
 * - Raw limit: the same snapshot rows (same table, same keys, same jsonb shape) written straight through pg as
 *   back-to-back multi-row upserts (INSERT … SELECT FROM jsonb_to_recordset … ON CONFLICT (kind, key) DO UPDATE), with
 *   as many concurrent writers as the host has commit lanes (each writer on its own share of the keys, as each lane
 *   is; each statement's rows picked uniformly at random from that share, as the host's batches hold whichever actors
 *   random senders hit, so both touch the same scattered pages), swept over batch sizes before and after the host run
 *   (after it also at the mean batch the host achieved). rows/s credits each statement by the share of its duration
 *   that falls inside the window (BENCH_RAW_MS), so a few large statements do not round the rate to whole statements.
 *   The best rows/s of the sweep is the raw limit: the harshest fair baseline, whatever batch size suits this disk.
 * - ratio = host events/s ÷ raw rows/s; host rows/s is printed beside events/s, to compare rows with rows.
 *
 * Why this baseline: it is the work Postgres must do at minimum for an actor's state to be durable (one row per actor
 * per commit), with nothing of the host's own cost. The host writes one journal row per actor per commit (and now and
 * then a snapshot), checks the epoch/journal-head fence and runs the machine; the raw path does none of that, on
 * purpose: the ratio is the price of durability and bookkeeping. With 1 actor the raw path writes one row per statement (an upsert
 * cannot touch a row twice) while the host journals a whole batch of that actor's events in one statement, so its
 * events/s can exceed the raw rows/s there; that ratio above 100 % is real, not an error (its rows/s column is the
 * like-for-like figure).
 * Each phase (raw sweep before, host, raw sweep after) starts right after a VACUUM (ANALYZE) of the actor tables and a
 * CHECKPOINT, so that neither the dead row versions an earlier phase left (which the next phase's index probes would
 * step over) nor Postgres's own checkpoint (every ~540 MB of WAL by default, about once per run) or autovacuum lands
 * in one path's window and not the other's.
 * Latency is measured closed-loop, so it is that of a server at saturation with C requests in flight (Little's law:
 * mean latency ≈ C ÷ events/s); C is printed with the figures.
 *
 * Environment (all optional): BENCH_DATABASE_URL (a cluster to use instead of an embedded Postgres; a fresh database
 * is created and dropped), BENCH_ACTORS (default 1,100,10000), BENCH_SENDERS (256), BENCH_DURATION_MS (6000),
 * BENCH_WARMUP_MS (1000), BENCH_RAW_MS (1200 per sweep point), BENCH_COMMIT_LANES, BENCH_MAX_BATCH_ACTORS,
 * BENCH_TIMEOUT_MS (300000: the run fails rather than hangs), BENCH_PROFILE=1 (one more window per actor count under V8's
 * sampling profiler, after the measured one so it is not slowed; prints where the bench process's time went), BENCH_ENFORCE_TARGETS=1 (exit 1 when a target is missed;
 * otherwise the exit code is 1 only when the bench itself failed).
 */
import { availableParallelism } from 'node:os';
import { initialTransition } from 'xstate';
import { ActorHost, type HostLogger } from '../actors/actor-host.js';
import { defaultActorPolicy } from '../actors/actor-kind.js';
import { systemClock } from '../actors/clock.js';
import { InProcessOwnership } from '../actors/ownership.js';
import { PostgresActorStore } from '../storage/postgres/actor-store.postgres.js';
import { tallyKind, tallyMachine } from './fixtures/tally.kind.js';
import { openBenchDatabase, type BenchDatabase } from './support/bench-database.js';
import { guardBench } from './support/bench-guard.js';
import { profileDuring } from './support/cpu-profile.js';
import { MachineCpu, sampleMachineCpu } from './support/cpu.js';
import { BatchStats, runLoad, type BatchTotals, type LoadResult } from './support/host-load.js';
import { RawUpserter, type RawRun } from './support/raw-upsert.js';
import { percent, round2, table } from './support/report-format.js';

const TARGET_RATIO = 0.5;
const TARGET_P99_MS = 25;
const TARGET_ACTORS = 10_000;
/** The host stores an actor's snapshot every this many events (the tally kind's policy). */
const SNAPSHOT_EVERY = { ...defaultActorPolicy, ...tallyKind.policy }.snapshotEvery;

const config = Object.freeze({
  actorCounts: listEnv('BENCH_ACTORS', [1, 100, 10_000]),
  senders: intEnv('BENCH_SENDERS', 256),
  durationMs: intEnv('BENCH_DURATION_MS', 6_000),
  warmupMs: intEnv('BENCH_WARMUP_MS', 1_000),
  rawMs: intEnv('BENCH_RAW_MS', 1_200),
  rawWarmupMs: 300,
  commitLanes: intEnv('BENCH_COMMIT_LANES', 2),
  maxBatchActors: intEnv('BENCH_MAX_BATCH_ACTORS', 4_000),
  timeoutMs: intEnv('BENCH_TIMEOUT_MS', 300_000),
  databaseUrl: process.env.BENCH_DATABASE_URL || undefined,
  profile: process.env.BENCH_PROFILE === '1',
});

/** With BENCH_PROFILE=1: where the bench process's time went in one more window after each measured one. */
const profileLines: string[] = [];

interface CountResult {
  readonly actors: number;
  readonly host: LoadResult;
  readonly batches: {
    readonly count: number;
    readonly meanActors: number;
    readonly meanEvents: number;
    readonly meanCommitMs: number;
    /** Journal rows (one per actor per batch) committed in the window, per second. */
    readonly rowsPerSec: number;
    readonly meanSnapshots: number;
    /** Snapshot rows stored per 1,000 events. */
    readonly snapshotsPerKiloEvent: number;
  };
  readonly raw: readonly RawRun[];
  readonly rawBest: RawRun;
  readonly rawMatched: RawRun | undefined;
  readonly ratio: number;
  /** CPU µs of every process on the machine per host event / per raw row; includes any background load. */
  readonly hostMicrosPerEvent: number | undefined;
  readonly rawMicrosPerRow: number | undefined;
}

/** The tables both paths write; settled before every phase (see BenchDatabase.settle). */
const ACTOR_TABLES = ['actor_snapshots', 'actor_journal'] as const;
/** Whether every phase started on settled tables right after a CHECKPOINT (see BenchDatabase.settle). */
let checkpointed = true;

/** Silent, but counts what the host would have logged: a clean run logs nothing. */
let loggedProblems = 0;
const counting: HostLogger = { warn: () => void loggedProblems++, error: () => void loggedProblems++, info: () => {} };

/** The snapshot row of a tally actor after `events` events, exactly as the host persists it. */
const persistedTemplate = tallyMachine.getPersistedSnapshot(initialTransition(tallyMachine)[0]) as Record<string, unknown>;
const snapshotAt = (events: number): unknown => ({
  ...persistedTemplate,
  context: { total: events, events, lastAt: Date.now() },
});

async function benchActorCount(database: BenchDatabase, store: PostgresActorStore, actors: number): Promise<CountResult> {
  const keys = Array.from({ length: actors }, (_, i) => `n${actors}-a${i}`);
  const raw = new RawUpserter({ pool: database.connection.pool, kind: tallyKind.name, keys, snapshotAt, epoch: 1 });
  const writers = Math.min(config.commitLanes, actors);
  const share = Math.floor(actors / writers);
  const sweep = batchSweep(share);
  const rawRuns: RawRun[] = [];

  // Rows exist before the host starts, so activation really loads a snapshot (the raw path wrote it).
  await raw.seed(Math.min(actors, 1_000));
  checkpointed &&= await database.settle(ACTOR_TABLES);
  for (const batchRows of sweep) rawRuns.push(await rawRun(raw, writers, batchRows));

  const stats = new BatchStats();
  let inWindow: BatchTotals | undefined;
  const host = new ActorHost({
    store,
    ownership: new InProcessOwnership(),
    clock: systemClock,
    kinds: [tallyKind],
    logger: counting,
    observer: stats,
    commitLanes: config.commitLanes,
    maxBatchActors: config.maxBatchActors,
  });
  host.start();
  let measured: LoadResult;
  try {
    checkpointed &&= await database.settle(ACTOR_TABLES);
    const load = { host, kind: tallyKind.name, keys, senders: config.senders };
    const activation = await runLoad({ ...load, pick: 'round-robin', durationMs: 60_000, maxEvents: Math.max(actors, 8 * config.senders) });
    if (activation.failures > 0) throw new Error(`warm-up failed ${activation.failures} times: ${activation.firstFailure}`);
    // Each activation stored a snapshot on its first write, so every actor's next one would fall due at about the
    // same event; a short window at 10,000 actors (≈ 15 events each) would then see none. 0..63 more events per
    // actor, at random, spread the actors over the snapshot cycle as a long run does: the window stores snapshots at
    // the steady rate.
    const spread = snapshotSpread(actors);
    const spreading = await runLoad({ ...load, pick: { sequence: spread }, durationMs: config.timeoutMs });
    if (spreading.failures > 0 || spreading.events !== spread.length) {
      throw new Error(`snapshot-spreading warm-up sent ${spreading.events} of ${spread.length} events: ${spreading.firstFailure ?? 'timed out'}`);
    }
    await runLoad({ ...load, pick: 'random', durationMs: config.warmupMs });
    stats.reset();
    measured = await runLoad({ ...load, pick: 'random', durationMs: config.durationMs, onWindowClosed: () => (inWindow = stats.totals()) });
    if (config.profile) {
      const { result, lines } = await profileDuring('actors-bench', () => runLoad({ ...load, pick: 'random', durationMs: config.durationMs }));
      profileLines.push(`${actors} actors, one more window profiled (${Math.round(result.eventsPerSec)} events/s under the profiler):`, ...lines);
    }
  } finally {
    await host.drain();
  }
  // Commits that completed inside the window (a reply inside the window needs its commit there too).
  const totals: BatchTotals = inWindow ?? stats.totals();
  const batches = {
    count: totals.batches,
    meanActors: totals.batches ? totals.actors / totals.batches : NaN,
    meanEvents: totals.batches ? totals.events / totals.batches : NaN,
    meanCommitMs: totals.batches ? totals.commitMs / totals.batches : NaN,
    rowsPerSec: totals.actors / measured.seconds,
    meanSnapshots: totals.batches ? totals.snapshots / totals.batches : NaN,
    snapshotsPerKiloEvent: totals.events ? (1000 * totals.snapshots) / totals.events : NaN,
  };

  // Second pass, now also at the batch size the host reached; the best of both passes is the limit.
  const matched = Math.max(1, Math.min(share, Math.round(batches.meanActors || 1)));
  checkpointed &&= await database.settle(ACTOR_TABLES);
  for (const batchRows of [...new Set([matched, ...sweep])]) rawRuns.push(await rawRun(raw, writers, batchRows));
  const rawBest = rawRuns.reduce((a, b) => (b.rowsPerSec > a.rowsPerSec ? b : a));
  const rawMatched = rawRuns.filter((r) => r.batchRows === matched).reduce<RawRun | undefined>(
    (a, b) => (!a || b.rowsPerSec > a.rowsPerSec ? b : a),
    undefined,
  );
  return {
    actors,
    host: measured,
    batches,
    raw: rawRuns,
    rawBest,
    rawMatched,
    ratio: measured.eventsPerSec / rawBest.rowsPerSec,
    hostMicrosPerEvent: MachineCpu.microsPer(measured.machineCpu, measured.eventsPerSec),
    rawMicrosPerRow: MachineCpu.microsPer(rawBest.machineCpu, rawBest.rowsPerSec),
  };
}

function rawRun(raw: RawUpserter, concurrency: number, batchRows: number): Promise<RawRun> {
  return raw.run({ concurrency, batchRows, durationMs: config.rawMs, warmupMs: config.rawWarmupMs });
}

/** Key indexes for the warm-up that spreads actors over the snapshot cycle: each 0..SNAPSHOT_EVERY−1 times, shuffled. */
function snapshotSpread(actors: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < actors; i++) for (let n = Math.floor(Math.random() * SNAPSHOT_EVERY); n > 0; n--) out.push(i);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Batch sizes for the raw sweep: each writer's whole share of the keys, then ¼, ¹⁄₁₆ and ¹⁄₆₄ of it (at least one row). */
function batchSweep(share: number): number[] {
  const sizes = new Set<number>();
  for (let size = share, steps = 0; size >= 1 && steps < 4; size = Math.floor(size / 4), steps++) sizes.add(size);
  return [...sizes];
}

function report(results: readonly CountResult[], where: string, startedAt: number): boolean {
  const at = results.find((r) => r.actors === TARGET_ACTORS);
  const ratioOk = at ? at.ratio >= TARGET_RATIO : undefined;
  const p99Ok = at ? at.host.latency.p99 < TARGET_P99_MS : undefined;
  const failures = results.reduce((n, r) => n + r.host.failures, 0);
  const pass = ratioOk === true && p99Ok === true && failures === 0;

  const out: string[] = [];
  out.push('');
  out.push(
    `actor host benchmark — Postgres: ${where}; ${config.senders} closed-loop senders, uniform random keys; ` +
      `window ${config.durationMs / 1000} s; commitLanes=${config.commitLanes}, maxBatchActors=${config.maxBatchActors}`,
  );
  out.push(
    `machine: ${availableParallelism()} cores, node ${process.execArgv.join(' ') || '(no flags)'}, ${background === undefined ? 'background load unknown' : `${percent(background)} busy before the bench started`}` +
      ` (figures are only comparable between quiet runs); ` +
      (checkpointed ? 'each phase starts right after VACUUM (ANALYZE) and CHECKPOINT' : 'VACUUM or CHECKPOINT not permitted: they may fall in any phase'),
  );
  out.push('');
  const header = ['actors', 'events/s', 'rows/s', 'p50 ms', 'p99 ms', 'max ms', 'raw rows/s', 'raw batch', 'ratio', 'matched', 'host batch act/ev', 'snap/1k ev', 'commit ms', 'cpu proc/machine', 'cpu µs/ev:row', 'fail'];
  const rows = results.map((r) => [
    r.actors.toLocaleString('en-US'),
    Math.round(r.host.eventsPerSec).toLocaleString('en-US'),
    Math.round(r.batches.rowsPerSec).toLocaleString('en-US'),
    r.host.latency.p50.toFixed(1),
    r.host.latency.p99.toFixed(1),
    r.host.latency.max.toFixed(1),
    Math.round(r.rawBest.rowsPerSec).toLocaleString('en-US'),
    `${r.rawBest.batchRows}×${r.rawBest.concurrency}`,
    percent(r.ratio),
    r.rawMatched ? percent(r.host.eventsPerSec / r.rawMatched.rowsPerSec) : '—',
    `${r.batches.meanActors.toFixed(0)}/${r.batches.meanEvents.toFixed(0)}`,
    r.batches.snapshotsPerKiloEvent.toFixed(1),
    r.batches.meanCommitMs.toFixed(1),
    `${percent(r.host.processCpu)}/${r.host.machineCpu === undefined ? '—' : percent(r.host.machineCpu)}`,
    `${micros(r.hostMicrosPerEvent)}:${micros(r.rawMicrosPerRow)}`,
    String(r.host.failures),
  ]);
  out.push(...table(header, rows));
  out.push('');
  out.push('raw sweep (rows/s by batch rows × writers, both passes):');
  for (const r of results) {
    out.push(`  ${r.actors}: ${r.raw.map((x) => `${x.batchRows}×${x.concurrency} ${Math.round(x.rowsPerSec)}`).join(', ')}`);
  }
  out.push('');
  out.push('rows/s = the host\'s journal rows committed in the window per second (one per actor per commit, however many of');
  out.push('its events the commit holds): compare it with raw rows/s for rows against rows. snap/1k ev = snapshot rows the host');
  out.push(`stored per 1,000 events: one per ${SNAPSHOT_EVERY} events of an actor, ${(1000 / SNAPSHOT_EVERY).toFixed(1)}, but at most one per actor per commit, so fewer`);
  out.push(`where a commit holds more than ${SNAPSHOT_EVERY} events of one actor (1 actor: one per commit).`);
  out.push('ratio = host events/s ÷ best raw rows/s; matched = the same against the raw run at the host\'s own mean batch;');
  out.push('cpu proc = bench process (host, pg client and the senders) in % of one core; machine = every process incl. Postgres,');
  out.push('in % of all cores; cpu µs/ev:row = CPU time of every process per host event : per raw row (best raw run).');
  out.push('With 1 actor the raw path can write one row per statement (an upsert cannot touch a row twice)');
  out.push('while the host journals all queued events of an actor in one statement: hence ratios far above 100 % there.');
  out.push(...profileLines);
  if (loggedProblems > 0) out.push(`host logged ${loggedProblems} warnings/errors during the run`);
  for (const r of results) if (r.host.failures > 0) out.push(`${r.actors} actors: ${r.host.failures} sends failed, first: ${r.host.firstFailure}`);
  out.push('');
  if (at) {
    out.push(`target ratio ≥ ${percent(TARGET_RATIO)} at ${TARGET_ACTORS} actors: ${percent(at.ratio)} ${ratioOk ? 'PASS' : 'FAIL'}`);
    out.push(`target p99 < ${TARGET_P99_MS} ms at ${TARGET_ACTORS} actors: ${at.host.latency.p99.toFixed(1)} ms ${p99Ok ? 'PASS' : 'FAIL'}`);
    out.push(`overall: ${pass ? 'PASS' : 'FAIL'}`);
  } else {
    out.push(`overall: n/a (the targets are set at ${TARGET_ACTORS} actors, which this run did not measure)`);
  }
  process.stdout.write(`${out.join('\n')}\n`);

  const json = {
    bench: 'actors',
    postgres: where,
    nodeFlags: process.execArgv,
    senders: config.senders,
    backgroundCpu: background === undefined ? null : round2(background),
    checkpointed,
    windowMs: config.durationMs,
    commitLanes: config.commitLanes,
    maxBatchActors: config.maxBatchActors,
    results: results.map((r) => ({
      actors: r.actors,
      eventsPerSec: Math.round(r.host.eventsPerSec),
      p50Ms: round2(r.host.latency.p50),
      p99Ms: round2(r.host.latency.p99),
      maxMs: round2(r.host.latency.max),
      failures: r.host.failures,
      rawRowsPerSec: Math.round(r.rawBest.rowsPerSec),
      rawBatchRows: r.rawBest.batchRows,
      rawWriters: r.rawBest.concurrency,
      ratio: round2(r.ratio),
      ratioMatched: r.rawMatched ? round2(r.host.eventsPerSec / r.rawMatched.rowsPerSec) : null,
      hostBatchActors: round2(r.batches.meanActors),
      hostBatchEvents: round2(r.batches.meanEvents),
      hostCommitMs: round2(r.batches.meanCommitMs),
      hostJournalRowsPerSec: Math.round(r.batches.rowsPerSec),
      hostBatchSnapshots: round2(r.batches.meanSnapshots),
      hostSnapshotsPerKiloEvent: round2(r.batches.snapshotsPerKiloEvent),
      hostCpuMicrosPerEvent: r.hostMicrosPerEvent === undefined ? null : Math.round(r.hostMicrosPerEvent),
      rawCpuMicrosPerRow: r.rawMicrosPerRow === undefined ? null : Math.round(r.rawMicrosPerRow),
    })),
    targets: { actors: TARGET_ACTORS, ratio: TARGET_RATIO, p99Ms: TARGET_P99_MS },
    pass: at ? pass : null,
    seconds: Math.round((performance.now() - startedAt) / 1000),
  };
  process.stdout.write(`${JSON.stringify(json)}\n`);
  return pass;
}

/** Share of the whole machine busy before the bench started; undefined off Linux. */
let background: number | undefined;

async function main(): Promise<void> {
  const startedAt = performance.now();
  let database: BenchDatabase | undefined;
  const cleanup = async (): Promise<void> => {
    await database?.close();
  };
  const guard = guardBench(cleanup, config.timeoutMs);
  try {
    // Other work on the machine skews every figure; say how busy it was before the bench added its own load.
    background = await sampleMachineCpu(1_000);
    process.stderr.write(`bench: starting ${config.databaseUrl ? 'on BENCH_DATABASE_URL' : 'embedded Postgres'}…\n`);
    database = await openBenchDatabase({
      clusterUrl: config.databaseUrl,
      maxConnections: Math.max(10, config.commitLanes + 4),
    });
    const store = new PostgresActorStore(database.connection);
    const results: CountResult[] = [];
    for (const actors of config.actorCounts) {
      process.stderr.write(`bench: ${actors} actors…\n`);
      const result = await benchActorCount(database, store, actors);
      results.push(result);
      process.stderr.write(
        `bench: ${actors} actors: ${Math.round(result.host.eventsPerSec)} events/s, p99 ${result.host.latency.p99.toFixed(1)} ms, ` +
          `raw ${Math.round(result.rawBest.rowsPerSec)} rows/s\n`,
      );
    }
    const pass = report(results, database.where, startedAt);
    // Failed sends are a broken host, not a slow one: they fail the run whatever the targets.
    const failedSends = results.some((r) => r.host.failures > 0);
    if (failedSends || (!pass && process.env.BENCH_ENFORCE_TARGETS === '1')) process.exitCode = 1;
  } finally {
    guard.disarm();
    await cleanup();
  }
}

function micros(x: number | undefined): string {
  return x === undefined ? '—' : x.toFixed(0);
}


function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

function listEnv(name: string, fallback: readonly number[]): readonly number[] {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  return raw.split(',').map((part) => {
    const value = Number(part.trim());
    if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must list positive integers, got "${raw}"`);
    return value;
  });
}

await main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
