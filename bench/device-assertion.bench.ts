/**
 * Device-assertion verifications per second on one process, beside jose's raw ES256 verify rate measured in the same
 * run on the same signatures. Target: ≥ 70 % of raw.
 *
 *   npm run bench:assertions
 *
 * Raw: `compactVerify(jws, key)` with an already imported key, back to back. Host: the full server path for a
 * request carrying `Platform-Device-Assertion` (header decode, device lookup through the device and account actors,
 * cached key import, signature, method/path/time checks, SHA-256 of the body, single-use id) on the same number of
 * assertions, each with its own id. Both loops keep `CONCURRENCY` verifications in flight, as a server would.
 * Environment: BENCH_DATABASE_URL, BENCH_ASSERTIONS (default 30000), BENCH_DEVICES (default 50).
 */
import { compactVerify, importJWK, type CryptoKey } from 'jose';
import { ActorHost } from '../actors/actor-host.js';
import { systemClock } from '../actors/clock.js';
import { identityKinds } from '../actors/identity.actors.js';
import { InProcessOwnership } from '../actors/ownership.js';
import { DeviceClient } from '../client/device-client.js';
import { Accounts } from '../identity/accounts.js';
import { acceptDeviceKey } from '../identity/device-keys.js';
import { DeviceAssertionVerifier, ReplayGuard } from '../identity/device-assertion.js';
import { PostgresActorStore } from '../storage/postgres/actor-store.postgres.js';
import type { IncomingRequest } from '../transport/http/credentials.js';
import { openBenchDatabase } from './support/bench-database.js';

const ASSERTIONS = Number(process.env.BENCH_ASSERTIONS ?? 30_000);
const DEVICES = Number(process.env.BENCH_DEVICES ?? 50);
const CONCURRENCY = 64;
const TARGET = 0.7;
const silent = { warn: () => {}, error: () => {}, info: () => {} };

async function inFlight<T>(items: readonly T[], work: (item: T) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
  return items.length / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
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
      const started = await accounts.startEnrolment({ handle: `bench${i}`, deviceName: client.name, ...key });
      client.deviceId = started.deviceId;
      const { accountId } = (await accounts.lookupDevice(started.deviceId))!;
      await accounts.completeEnrolment(accountId, started.enrolmentId, started.nonce);
      devices.push({ client, key: (await importJWK(key.publicKey, 'ES256')) as CryptoKey });
    }
    const body = Buffer.from(JSON.stringify({ deviceName: 'x'.repeat(64) }));
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
    const verifier = new DeviceAssertionVerifier({ lookup: accounts.lookupDevice, clock: systemClock, replays: new ReplayGuard(systemClock) });
    // Warm both paths (JIT, key cache, live actors) on a tenth, then measure raw, host, raw again.
    await inFlight(requests.slice(0, ASSERTIONS / 10), (r) => compactVerify(r.jws, r.key));
    await inFlight(requests.slice(0, ASSERTIONS / 10), (r) => verifier.verify({ ...r.request, headers: { 'platform-device-assertion': r.jws } }, { bodyBound: true }).catch(() => {}));
    const raw1 = await inFlight(requests, (r) => compactVerify(r.jws, r.key));
    const fresh = requests.slice(ASSERTIONS / 10);
    const hostRate = await inFlight(fresh, (r) => verifier.verify(r.request, { bodyBound: true }));
    const raw2 = await inFlight(requests, (r) => compactVerify(r.jws, r.key));
    const raw = Math.max(raw1, raw2);
    const ratio = hostRate / raw;
    const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
    process.stdout.write(
      `device assertion verification — ${DEVICES} devices, ${fresh.length} assertions, ${CONCURRENCY} in flight\n` +
        `  jose raw ES256 verify : ${fmt(raw)} /s (runs: ${fmt(raw1)}, ${fmt(raw2)})\n` +
        `  server verification   : ${fmt(hostRate)} /s\n` +
        `  ratio                 : ${(ratio * 100).toFixed(0)} % (target ≥ ${TARGET * 100} %): ${ratio >= TARGET ? 'PASS' : 'FAIL'}\n` +
        `${JSON.stringify({ bench: 'device-assertion', rawPerSec: Math.round(raw), hostPerSec: Math.round(hostRate), ratio: Math.round(ratio * 100) / 100, pass: ratio >= TARGET })}\n`,
    );
  } finally {
    await host.drain();
    await database.close();
  }
}

await main();
