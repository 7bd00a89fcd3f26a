/**
 * Token-endpoint exchanges per second on one process, beside jose's raw ES256 verify rate measured in the same run.
 *
 *   npm run bench:tokens
 *
 * Exchange: what `POST /v1/oidc/token` does after parsing its form, on a real Postgres: one statement consumes the
 * single-use code if client, redirect URI, PKCE S256 and expiry match and creates the grant and its first refresh
 * token; then the account epoch is checked (account actor) and the access and ID tokens are signed (two ES256
 * signatures). Refresh: one statement spends the token and stores the next one; the epoch is checked and an access
 * token signed. Both keep
 * `CONCURRENCY` requests in flight, as a server would. Raw: `compactVerify` of the issued access tokens with an
 * imported key, back to back, before and after; the better run is the baseline.
 * Each phase also prints the CPU it cost per operation: this process (main thread and libuv pool) and the embedded
 * cluster's `postgres` processes (every visible one on BENCH_DATABASE_URL), from /proc. BENCH_PROFILE=1 runs one more exchange phase under V8's sampling profiler (after
 * the measured ones, so they are not slowed) and prints where this process's time went; the .cpuprofile is kept.
 * Environment: BENCH_DATABASE_URL, BENCH_EXCHANGES (default 6000), BENCH_ACCOUNTS (default 20), BENCH_PROFILE (0 | 1).
 */
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compactVerify, importJWK, type CryptoKey } from 'jose';
import { ActorHost } from '../actors/actor-host.js';
import { systemClock } from '../actors/clock.js';
import { identityKinds } from '../actors/identity.actors.js';
import { InProcessOwnership } from '../actors/ownership.js';
import { DeviceClient } from '../client/device-client.js';
import { pkcePair } from '../client/oidc-client.js';
import { Accounts } from '../identity/accounts.js';
import { CSRF_SECRET } from '../identity/browser-sessions.js';
import { acceptDeviceKey } from '../identity/device-keys.js';
import { CLI_CLIENT_ID, EnvironmentDirectory, PAIRWISE_SECRET } from '../identity/environments.js';
import { newId } from '../identity/ids.js';
import { OAuthGrants, type TokenResponse } from '../identity/oauth-grants.js';
import { RegistrySecrets } from '../identity/opaque-tokens.js';
import { RegistrySigningKeys } from '../identity/signing-keys.js';
import { PostgresActorStore } from '../storage/postgres/actor-store.postgres.js';
import { openBenchDatabase } from './support/bench-database.js';
import { summariseProfile } from './support/cpu-profile.js';
import { GroupCpu, postgresPids, postgresPidsUnder } from './support/proc.js';
import { percent } from './support/report-format.js';

const EXCHANGES = Number(process.env.BENCH_EXCHANGES ?? 6_000);
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 20);
const CONCURRENCY = 64;
const PROFILE = process.env.BENCH_PROFILE === '1';
const silent = { warn: () => {}, error: () => {}, info: () => {} };

interface Phase<R> {
  readonly perSec: number;
  readonly results: R[];
  /** CPU µs per item: this process (all its threads) and every postgres process. */
  readonly nodeMicros: number;
  readonly postgresMicros: number;
}

async function inFlight<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<Phase<R>> {
  let next = 0;
  const results: R[] = new Array<R>(items.length);
  // An embedded cluster is this process's child; on BENCH_DATABASE_URL every visible postgres process counts.
  const postgres = GroupCpu.start(process.env.BENCH_DATABASE_URL ? postgresPids : () => postgresPidsUnder(process.pid));
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
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
async function profiled<T>(items: readonly T[], work: (item: T) => Promise<TokenResponse>): Promise<string[]> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  const phase = await inFlight(items, work);
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  const file = path.join(tmpdir(), `token-bench-${Date.now()}.cpuprofile`);
  await writeFile(file, JSON.stringify(profile));
  const summary = summariseProfile(profile, 20, { keepBenchFrames: true });
  return [
    `  profile of one more exchange phase (${Math.round(phase.perSec)}/s under the profiler): main thread ${percent(summary.busy)} busy; shares of its busy time:`,
    `    self time by area: ${summary.byArea.map((a) => `${a.name} ${percent(a.share)}`).join(', ')}`,
    '    self time, top functions:',
    ...summary.topFunctions.map((f) => `      ${percent(f.share).padStart(5)}  ${f.name}`),
    "    the project's functions, inclusive:",
    ...summary.topProjectInclusive.map((f) => `      ${percent(f.share).padStart(5)}  ${f.name}`),
    `    profile: ${file}`,
  ];
}

async function main(): Promise<void> {
  const database = await openBenchDatabase({ clusterUrl: process.env.BENCH_DATABASE_URL, maxConnections: 8 });
  const db = database.connection.db;
  const host = new ActorHost({ store: new PostgresActorStore(database.connection), ownership: new InProcessOwnership(), clock: systemClock, kinds: identityKinds, logger: silent });
  try {
    const accounts = new Accounts(host, systemClock);
    const accountIds: string[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const client = await DeviceClient.generate(`bench ${i}`);
      const key = await acceptDeviceKey({ kty: 'EC', crv: 'P-256', x: client.publicJwk.x!, y: client.publicJwk.y! });
      const started = await accounts.startEnrolment({ handle: `bench${i}`, deviceName: client.name, ...key });
      const { accountId } = (await accounts.lookupDevice(started.deviceId))!;
      await accounts.completeEnrolment(accountId, started.enrolmentId, started.nonce);
      accountIds.push(accountId);
    }
    const [keys, secrets] = await Promise.all([RegistrySigningKeys.load(db), RegistrySecrets.load(db, [PAIRWISE_SECRET, CSRF_SECRET])]);
    const directory = new EnvironmentDirectory(db, systemClock, secrets);
    await directory.ensureCliClient();
    const cli = (await directory.client(CLI_CLIENT_ID))!;
    const grants = new OAuthGrants({ db, clock: systemClock, keys, directory, epochOf: accounts.epochOf, issuer: () => 'https://registry.bench' });
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
            browserId: newId('brw'),
            authTime: Date.now(),
          });
          return { code, verifier };
        })
      ).results;
    const exchange = (c: { code: string; verifier: string }): Promise<TokenResponse> => grants.exchangeCode({ client: cli, code: c.code, redirectUri, codeVerifier: c.verifier });

    // Warm up (JIT, key import, account actors live), then measure on fresh codes.
    await inFlight(await issue(Math.max(200, EXCHANGES / 10)), exchange);
    const codes = await issue(EXCHANGES);
    const verifyKey = (await importJWK(keys.jwks.keys[0]!, 'ES256')) as CryptoKey;
    const sample = (await inFlight((await issue(2_000)), exchange)).results.map((t) => t.access_token);
    const raw = () => inFlight(Array.from({ length: EXCHANGES * 2 }, (_, i) => sample[i % sample.length]!), (jws) => compactVerify(jws, verifyKey));

    await database.checkpoint();
    const raw1 = await raw();
    const exchanged = await inFlight(codes, exchange);
    const refreshed = await inFlight(exchanged.results, (t) => grants.refresh({ client: cli, refreshToken: t.refresh_token! }));
    const raw2 = await raw();
    const baseline = raw1.perSec >= raw2.perSec ? raw1 : raw2;
    const profileLines = PROFILE ? await profiled(await issue(EXCHANGES), exchange) : [];
    const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
    const pct = (n: number): string => `${((n / baseline.perSec) * 100).toFixed(0)} %`;
    const cost = (p: Phase<unknown>): string => `cpu per op: node ${Math.round(p.nodeMicros)} µs, postgres ${Math.round(p.postgresMicros)} µs`;
    process.stdout.write(
      `token endpoint — ${ACCOUNTS} accounts, ${EXCHANGES} exchanges, ${CONCURRENCY} in flight\n` +
        `  jose raw ES256 verify          : ${fmt(baseline.perSec)} /s (runs: ${fmt(raw1.perSec)}, ${fmt(raw2.perSec)}; ${cost(baseline)})\n` +
        `  authorization_code exchanges   : ${fmt(exchanged.perSec)} /s (${pct(exchanged.perSec)} of raw; 2 signatures + 1 statement each; ${cost(exchanged)})\n` +
        `  refresh_token rotations        : ${fmt(refreshed.perSec)} /s (${pct(refreshed.perSec)} of raw; 1 signature + 1 statement each; ${cost(refreshed)})\n` +
        profileLines.map((l) => `${l}\n`).join('') +
        `${JSON.stringify({ bench: 'token-endpoint', rawPerSec: Math.round(baseline.perSec), exchangesPerSec: Math.round(exchanged.perSec), refreshesPerSec: Math.round(refreshed.perSec), exchangeRatio: Math.round((exchanged.perSec / baseline.perSec) * 100) / 100, refreshRatio: Math.round((refreshed.perSec / baseline.perSec) * 100) / 100 })}\n`,
    );
  } finally {
    await host.drain();
    await database.close();
  }
}

await main();
