/**
 * Device-assertion verifications per second on one process, beside jose's raw ES256 verify rate measured in the same
 * run on the same signatures. Target: ≥ 70 % of raw.
 *
 *   npm run bench:assertions
 *
 * Raw: `compactVerify(jws, key)` with an already imported key, back to back. Host: the full server path for a
 * request carrying `Platform-Device-Assertion` (header decode, device lookup through the device and account actors,
 * cached key import, signature, method/path/time checks, SHA-256 of the body, single-use id, remembered in memory and
 * written to Postgres before the request may act) on the same number of
 * assertions, each with its own id. Both loops keep a number of verifications in flight, as a server would, at each of
 * BENCH_IN_FLIGHT (64 and 256): the durable id record is group-committed, and its batches grow with the load (as in
 * the token bench). The headline ratio is the best rate either side reached at any load; each load is also printed
 * against its own raw. How busy the whole machine was in the second before the bench started (/proc/stat) is printed
 * with the figures: they are only comparable between quiet runs.
 * Environment: BENCH_DATABASE_URL, BENCH_ASSERTIONS (default 30000), BENCH_DEVICES (default 50), BENCH_IN_FLIGHT,
 * BENCH_PROFILE=1 (one more server pass at the largest load under V8's sampling profiler, after the measured ones so
 * they are not slowed; prints where the main thread's time went).
 */
import { availableParallelism } from 'node:os';
import { compactVerify, importJWK, type CryptoKey } from 'jose';
import { ActorHost } from '../actors/actor-host.js';
import { systemClock } from '../actors/clock.js';
import { identityKinds } from '../actors/identity.actors.js';
import { InProcessOwnership } from '../actors/ownership.js';
import { DeviceClient } from '../client/device-client.js';
import { Accounts } from '../identity/accounts.js';
import { AssertionUses } from '../identity/assertion-uses.js';
import { acceptDeviceKey } from '../identity/device-keys.js';
import { DeviceAssertionVerifier, ReplayGuard } from '../identity/device-assertion.js';
import { PostgresActorStore } from '../storage/postgres/actor-store.postgres.js';
import type { IncomingRequest } from '../transport/http/credentials.js';
import { openBenchDatabase } from './support/bench-database.js';
import { profileDuring } from './support/cpu-profile.js';
import { sampleMachineCpu } from './support/cpu.js';
import { percent, round2 } from './support/report-format.js';

const ASSERTIONS = Number(process.env.BENCH_ASSERTIONS ?? 30_000);
const DEVICES = Number(process.env.BENCH_DEVICES ?? 50);
/** Requests in flight, each a load of its own (BENCH_IN_FLIGHT, comma-separated). */
const LOADS = (process.env.BENCH_IN_FLIGHT ?? '64,256').split(',').map(Number);
const TARGET = 0.7;
const silent = { warn: () => {}, error: () => {}, info: () => {} };

async function inFlight<T>(items: readonly T[], load: number, work: (item: T) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: load }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
  return items.length / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  // Other work on the machine skews every figure; say how busy it was before the bench added its own load.
  const background = await sampleMachineCpu(1_000);
  const database = await openBenchDatabase({ clusterUrl: process.env.BENCH_DATABASE_URL, maxConnections: 8 });
  const host = new ActorHost({
    store: new PostgresActorStore(database.connection),
    ownership: new InProcessOwnership(),
    clock: systemClock,
    kinds: identityKinds,
    logger: silent,
  });
  try {
    const accounts = new Accounts(host, systemClock);
    const devices: Array<{ client: DeviceClient; key: CryptoKey }> = [];
    for (let i = 0; i < DEVICES; i++) {
      const client = await DeviceClient.generate(`bench ${i}`);
      const key = await acceptDeviceKey({ kty: 'EC', crv: 'P-256', x: client.publicJwk.x!, y: client.publicJwk.y! });
      const started = await accounts.startEnrolment({ handle: `bench${i}`, deviceName: client.name, clientAddress: '127.0.0.1', ...key });
      client.deviceId = started.deviceId;
      const { accountId } = (await accounts.lookupDevice(started.deviceId))!;
      await accounts.completeEnrolment(accountId, started.enrolmentId, started.nonce);
      devices.push({ client, key: (await importJWK(key.publicKey, 'ES256')) as CryptoKey });
    }
    const body = Buffer.from(JSON.stringify({ deviceName: 'x'.repeat(64) }));
    // Each id passes once and only within its time window, so every load signs its own assertions just before it runs.
    const sign = async (): Promise<Array<{ request: IncomingRequest; jws: string; key: CryptoKey }>> => {
      const requests: Array<{ request: IncomingRequest; jws: string; key: CryptoKey }> = [];
      for (let i = 0; i < ASSERTIONS; i++) {
        const { client, key } = devices[i % DEVICES]!;
        const jws = await client.assertion({ method: 'POST', target: '/v1/account/devices', body, bindBody: true });
        requests.push({
          jws,
          key,
          request: { method: 'POST', path: '/v1/account/devices', query: '', headers: { 'platform-device-assertion': jws }, remoteAddress: '127.0.0.1', body },
        });
      }
      return requests;
    };
    const verifier = new DeviceAssertionVerifier({ lookup: accounts.lookupDevice, clock: systemClock, replays: await ReplayGuard.open(systemClock, new AssertionUses(database.connection)) });
    const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
    const results: Array<{ load: number; raw: number; host: number }> = [];
    for (const load of LOADS) {
      const requests = await sign();
      // Warm both paths (JIT, key cache, live actors) on a tenth, then measure raw, host, raw again.
      const warm = requests.slice(0, ASSERTIONS / 10);
      await inFlight(warm, load, (r) => compactVerify(r.jws, r.key));
      await inFlight(warm, load, (r) => verifier.verify(r.request, { bodyBound: true }));
      const raw1 = await inFlight(requests, load, (r) => compactVerify(r.jws, r.key));
      const hostRate = await inFlight(requests.slice(ASSERTIONS / 10), load, (r) => verifier.verify(r.request, { bodyBound: true }));
      const raw2 = await inFlight(requests, load, (r) => compactVerify(r.jws, r.key));
      results.push({ load, raw: Math.max(raw1, raw2), host: hostRate });
      process.stdout.write(
        `  ${String(load).padStart(4)} in flight: raw ${fmt(raw1)}, ${fmt(raw2)} /s; server ${fmt(hostRate)} /s (${((hostRate / Math.max(raw1, raw2)) * 100).toFixed(0)} % of this load's raw)\n`,
      );
    }
    if (process.env.BENCH_PROFILE === '1') {
      const load = Math.max(...LOADS);
      const requests = await sign();
      const { result, lines } = await profileDuring('device-assertion-bench', () =>
        inFlight(requests, load, (r) => verifier.verify(r.request, { bodyBound: true })),
      );
      process.stdout.write(`  one more server pass at ${load} in flight, profiled (${fmt(result)} /s under the profiler):\n${lines.join('\n')}\n`);
    }
    const raw = Math.max(...results.map((r) => r.raw));
    const hostRate = Math.max(...results.map((r) => r.host));
    const ratio = hostRate / raw;
    process.stdout.write(
      `device assertion verification — ${DEVICES} devices, ${ASSERTIONS - ASSERTIONS / 10} assertions per load, in flight ${LOADS.join(' / ')}\n` +
        `  machine               : ${availableParallelism()} cores, ${busy(background)} (figures are only comparable between quiet runs)\n` +
        `  jose raw ES256 verify : ${fmt(raw)} /s (best of every load)\n` +
        `  server verification   : ${fmt(hostRate)} /s (best of every load)\n` +
        `  ratio                 : ${(ratio * 100).toFixed(0)} % (target ≥ ${TARGET * 100} %): ${ratio >= TARGET ? 'PASS' : 'FAIL'}\n` +
        `${JSON.stringify({ bench: 'device-assertion', backgroundCpu: background === undefined ? null : round2(background), rawPerSec: Math.round(raw), hostPerSec: Math.round(hostRate), ratio: Math.round(ratio * 100) / 100, pass: ratio >= TARGET, loads: results.map((r) => ({ inFlight: r.load, rawPerSec: Math.round(r.raw), hostPerSec: Math.round(r.host) })) })}\n`,
    );
  } finally {
    await host.drain();
    await database.close();
  }
}

function busy(background: number | undefined): string {
  return background === undefined ? 'background load unknown' : `${percent(background)} busy before the bench started`;
}

await main();
