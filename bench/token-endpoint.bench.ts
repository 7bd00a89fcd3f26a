/**
 * Token-endpoint exchanges per second on one process, beside jose's raw ES256 verify rate measured in the same run.
 *
 *   npm run bench:tokens
 *
 * Exchange: what `POST /v1/oidc/token` does after parsing its form, on a real Postgres: one statement consumes the
 * single-use code if client, redirect URI, PKCE S256 and expiry match and its page session is still signed in (held
 * until the statement commits), and creates the grant and its first refresh
 * token; then the account epoch is checked (account actor) and the access and ID tokens are signed (two ES256
 * signatures). Refresh: one statement spends the token and stores the next one; the epoch is checked and an access
 * token signed. Raw: `compactVerify` of the issued access tokens with an imported key.
 * Throughput is measured at several loads (requests kept in flight, as a server's clients would: BENCH_IN_FLIGHT,
 * default 64,256,512); at each, raw runs before and after the exchanges and rotations and the better raw run is that
 * load's baseline. The headline ratio is the best rate any load reached against the best raw rate any load reached:
 * each side at the load that suits it (raw verification saturates libuv's pool at a few dozen in flight; the token
 * endpoint's batched statements grow with the load, and their fixed cost per batch shrinks per request). The mean
 * latency at each load (in flight ÷ rate) is printed beside it.
 * Each phase also prints the CPU it cost per operation: this process (main thread and libuv pool) and the embedded
 * cluster's `postgres` processes (every visible one on BENCH_DATABASE_URL), from /proc. BENCH_PROFILE=1 runs one more exchange phase under V8's sampling profiler (after
 * the measured ones, so they are not slowed) and prints where this process's time went; the .cpuprofile is kept.
 * How busy the whole machine was in the second before the bench started (/proc/stat) is printed with the figures:
 * they are only comparable between quiet runs.
 * Environment: BENCH_DATABASE_URL, BENCH_EXCHANGES (default 6000), BENCH_ACCOUNTS (default 1000: a few sign-ins per person per load, as at a real endpoint), BENCH_IN_FLIGHT
 * (default 64,256,512), BENCH_PROFILE (0 | 1; profiles at the largest load).
 */
import { availableParallelism } from 'node:os';
import { compactVerify, importJWK, type CryptoKey } from 'jose';
import { ActorHost } from '../actors/actor-host.js';
import { systemClock } from '../actors/clock.js';
import { identityKinds } from '../actors/identity.actors.js';
import { InProcessOwnership } from '../actors/ownership.js';
import { DeviceClient } from '../client/device-client.js';
import { pkcePair } from '../client/oidc-client.js';
import { Accounts } from '../identity/accounts.js';
import { BrowserSessions, CSRF_SECRET } from '../identity/browser-sessions.js';
import { acceptDeviceKey } from '../identity/device-keys.js';
import { CLI_CLIENT_ID, EnvironmentDirectory, PAIRWISE_SECRET } from '../identity/environments.js';
import { newId } from '../identity/ids.js';
import { OAuthGrants, type TokenResponse } from '../identity/oauth-grants.js';
import { RegistrySecrets } from '../identity/opaque-tokens.js';
import { RegistrySigningKeys } from '../identity/signing-keys.js';
import { PostgresActorStore } from '../storage/postgres/actor-store.postgres.js';
import { openBenchDatabase } from './support/bench-database.js';
import { profileDuring } from './support/cpu-profile.js';
import { sampleMachineCpu } from './support/cpu.js';
import { GroupCpu, postgresPids, postgresPidsUnder } from './support/proc.js';
import { percent, round2 } from './support/report-format.js';

const EXCHANGES = Number(process.env.BENCH_EXCHANGES ?? 6_000);
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 1000);
const IN_FLIGHT = (process.env.BENCH_IN_FLIGHT ?? '64,256,512').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
if (IN_FLIGHT.length === 0) throw new Error(`BENCH_IN_FLIGHT must list positive integers, got ${JSON.stringify(process.env.BENCH_IN_FLIGHT)}`);
const PROFILE = process.env.BENCH_PROFILE === '1';
const silent = { warn: () => {}, error: () => {}, info: () => {} };

interface Level {
  readonly load: number;
  readonly raw: Phase<unknown>;
  readonly rawRuns: readonly number[];
  readonly exchanged: Phase<TokenResponse>;
  readonly refreshed: Phase<TokenResponse>;
}

interface Phase<R> {
  readonly perSec: number;
  readonly results: R[];
  /** CPU µs per item: this process (all its threads) and every postgres process. */
  readonly nodeMicros: number;
  readonly postgresMicros: number;
}

async function inFlight<T, R>(items: readonly T[], work: (item: T) => Promise<R>, concurrency: number): Promise<Phase<R>> {
  let next = 0;
  const results: R[] = new Array<R>(items.length);
  // An embedded cluster is this process's child; on BENCH_DATABASE_URL every visible postgres process counts.
  const postgres = GroupCpu.start(process.env.BENCH_DATABASE_URL ? postgresPids : () => postgresPidsUnder(process.pid));
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await work(items[i]!);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return {
    perSec: items.length / seconds,
    results,
    nodeMicros: (used.user + used.system) / items.length,
    postgresMicros: (postgres.seconds() * 1e6) / items.length,
  };
}

/** One more exchange phase under the sampling profiler: where this process's time goes per exchange. */
async function profiled<T>(items: readonly T[], work: (item: T) => Promise<TokenResponse>, concurrency: number): Promise<string[]> {
  const { result: phase, lines } = await profileDuring('token-bench', () => inFlight(items, work, concurrency));
  return [`  profile of one more exchange phase (${concurrency} in flight, ${Math.round(phase.perSec)}/s under the profiler):`, ...lines];
}

async function main(): Promise<void> {
  // Other work on the machine skews every figure; say how busy it was before the bench added its own load.
  const background = await sampleMachineCpu(1_000);
  const database = await openBenchDatabase({ clusterUrl: process.env.BENCH_DATABASE_URL, maxConnections: 8 });
  const db = database.connection.db;
  const host = new ActorHost({ store: new PostgresActorStore(database.connection), ownership: new InProcessOwnership(), clock: systemClock, kinds: identityKinds, logger: silent });
  try {
    const accounts = new Accounts(host, systemClock);
    const accountIds = (
      await inFlight(Array.from({ length: ACCOUNTS }, (_, i) => i), async (i) => {
        const client = await DeviceClient.generate(`bench ${i}`);
        const key = await acceptDeviceKey({ kty: 'EC', crv: 'P-256', x: client.publicJwk.x!, y: client.publicJwk.y! });
        const started = await accounts.startEnrolment({ handle: `bench${i}`, deviceName: client.name, clientAddress: '127.0.0.1', ...key });
        const { accountId } = (await accounts.lookupDevice(started.deviceId))!;
        await accounts.completeEnrolment(accountId, started.enrolmentId, started.nonce);
        return accountId;
      }, 32)
    ).results;
    const [keys, secrets] = await Promise.all([RegistrySigningKeys.load(db), RegistrySecrets.load(db, [PAIRWISE_SECRET, CSRF_SECRET])]);
    const directory = new EnvironmentDirectory(db, systemClock, secrets);
    await directory.ensureCliClient();
    const cli = (await directory.client(CLI_CLIENT_ID))!;
    const grants = new OAuthGrants({
      db, clock: systemClock, keys, directory, epochOf: accounts.epochOf, issuer: () => 'https://registry.bench', logger: silent, refreshReuseGraceSeconds: 30,
    });
    // One signed-in browser per account, as the authorization page holds: each exchange checks its code's page session.
    const sessions = new BrowserSessions(db, systemClock, secrets, accounts.epochOf);
    const pages = await Promise.all(
      accountIds.map(async (accountId) => (await sessions.create('page', { browserId: newId('brw'), accountId, accountEpoch: 1 })).session),
    );
    const redirectUri = 'http://127.0.0.1:43210/callback';

    const issue = async (n: number) =>
      (
        await inFlight(Array.from({ length: n }, (_, i) => i), async (i) => {
          const { verifier, challenge } = pkcePair();
          const code = await grants.issueCode({
            client: cli,
            redirectUri,
            codeChallenge: challenge,
            scopes: ['openid', 'management'],
            nonce: newId('n'),
            accountId: accountIds[i % ACCOUNTS]!,
            accountEpoch: 1,
            browserId: pages[i % ACCOUNTS]!.browserId,
            sessionId: pages[i % ACCOUNTS]!.id,
            authTime: Date.now(),
          });
          return { code, verifier };
        }, 64)
      ).results;
    const exchange = (c: { code: string; verifier: string }): Promise<TokenResponse> => grants.exchangeCode({ client: cli, code: c.code, redirectUri, codeVerifier: c.verifier });

    // Warm up (JIT, key import, account actors live), then measure on fresh codes.
    await inFlight(await issue(Math.max(200, EXCHANGES / 10)), exchange, 64);
    const verifyKey = (await importJWK(keys.jwks.keys[0]!, 'ES256')) as CryptoKey;
    const sample = (await inFlight(await issue(2_000), exchange, 64)).results.map((t) => t.access_token);
    const raw = (load: number) => inFlight(Array.from({ length: EXCHANGES * 2 }, (_, i) => sample[i % sample.length]!), (jws) => compactVerify(jws, verifyKey), load);

    const levels: Level[] = [];
    for (const load of IN_FLIGHT) {
      const codes = await issue(EXCHANGES);
      // Everyone signs out between loads, so each load's sign-ins meet accounts holding only their own (a few per
      // person, far below the per-account cap of live CLI sign-ins, whose count each exchange reads).
      await db.updateTable('oauth_grants').set({ revoked_at: new Date(), revoked_reason: 'bench_sign_out' }).where('revoked_at', 'is', null).execute();
      await database.settle(['oauth_grants']);
      const raw1 = await raw(load);
      const exchanged = await inFlight(codes, exchange, load);
      const refreshed = await inFlight(exchanged.results, (t) => grants.refresh({ client: cli, refreshToken: t.refresh_token! }), load);
      const raw2 = await raw(load);
      levels.push({ load, raw: raw1.perSec >= raw2.perSec ? raw1 : raw2, rawRuns: [raw1.perSec, raw2.perSec], exchanged, refreshed });
    }
    const largest = Math.max(...IN_FLIGHT);
    const profileLines = PROFILE ? await profiled(await issue(EXCHANGES), exchange, largest) : [];
    const best = (pick: (l: Level) => Phase<unknown>): Level => levels.reduce((a, b) => (pick(b).perSec > pick(a).perSec ? b : a));
    const rawBest = best((l) => l.raw).raw.perSec;
    const exchangeBest = best((l) => l.exchanged);
    const refreshBest = best((l) => l.refreshed);
    const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
    const pct = (n: number, of: number): string => `${((n / of) * 100).toFixed(0)} %`;
    const cost = (p: Phase<unknown>): string => `cpu/op node ${Math.round(p.nodeMicros)} µs, postgres ${Math.round(p.postgresMicros)} µs`;
    const latency = (p: Phase<unknown>, load: number): string => `mean ${((load / p.perSec) * 1000).toFixed(1)} ms`;
    const lines = [
      `token endpoint — ${ACCOUNTS} accounts, ${EXCHANGES} exchanges per load; loads (in flight): ${IN_FLIGHT.join(', ')}`,
      `  machine: ${availableParallelism()} cores, ${background === undefined ? 'background load unknown' : `${percent(background)} busy before the bench started`} (figures are only comparable between quiet runs)`,
    ];
    for (const l of levels) {
      lines.push(
        `  ${String(l.load).padStart(4)} in flight: raw ES256 verify ${fmt(l.raw.perSec)}/s (runs ${l.rawRuns.map(fmt).join(', ')}; ${cost(l.raw)})`,
        `                 authorization_code exchanges ${fmt(l.exchanged.perSec)}/s (${pct(l.exchanged.perSec, l.raw.perSec)} of this load's raw; ${latency(l.exchanged, l.load)}; ${cost(l.exchanged)})`,
        `                 refresh_token rotations ${fmt(l.refreshed.perSec)}/s (${pct(l.refreshed.perSec, l.raw.perSec)}; ${latency(l.refreshed, l.load)}; ${cost(l.refreshed)})`,
      );
    }
    lines.push(
      `  best: raw ${fmt(rawBest)}/s; exchanges ${fmt(exchangeBest.exchanged.perSec)}/s at ${exchangeBest.load} in flight = ${pct(exchangeBest.exchanged.perSec, rawBest)} of raw (2 signatures + 1 statement each); ` +
        `rotations ${fmt(refreshBest.refreshed.perSec)}/s at ${refreshBest.load} = ${pct(refreshBest.refreshed.perSec, rawBest)} (1 signature + 1 statement each); target ≥ 70 %`,
      ...profileLines,
      JSON.stringify({
        bench: 'token-endpoint',
        backgroundCpu: background === undefined ? null : round2(background),
        rawPerSec: Math.round(rawBest),
        exchangesPerSec: Math.round(exchangeBest.exchanged.perSec),
        refreshesPerSec: Math.round(refreshBest.refreshed.perSec),
        exchangeRatio: Math.round((exchangeBest.exchanged.perSec / rawBest) * 100) / 100,
        refreshRatio: Math.round((refreshBest.refreshed.perSec / rawBest) * 100) / 100,
      }),
    );
    process.stdout.write(lines.map((l) => `${l}\n`).join(''));
  } finally {
    await host.drain();
    await database.close();
  }
}

await main();
