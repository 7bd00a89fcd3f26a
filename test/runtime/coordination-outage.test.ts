import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { RuntimeClient } from '../../client/runtime-client.js';
import { productParts } from '../../server/main.js';
import { startEmbeddedPostgres, type RunningPostgres } from '../../storage/embedded-postgres.js';
import { jsonOf } from '../support/http.js';
import { assertProblem } from '../support/identity.js';
import { declareBackend, LONG_LEASE_ENV, runtimePerson, sessionState, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { startTestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * The Runtime plane fails closed when Postgres is gone: every Runtime call (HTTP, and the upgrades of both sockets)
 * answers 503 `runtime_coordination_unavailable` (with Retry-After) within seconds, nobody is admitted meanwhile, and
 * the server serves again once Postgres returns.
 *
 * This file runs its own embedded Postgres (not the runner's shared cluster) because it stops and kills it: once
 * gracefully (fast shutdown, which ends every connection with an error) and once by SIGKILL of the postmaster (a crash:
 * connections just drop, and Postgres recovers on restart).
 */
const ENDPOINT = 'https://api.x.example/g';
/** How long one refused call may take: a failed connect is refused at once on loopback; pg's own limit is 5 s. */
const PROMPT_MS = 3_000;
/** A call that has not answered by then hangs: the test says so instead of waiting for the runner's file timeout. */
const HANG_MS = 15_000;

let pgDir: string;
let postgres: RunningPostgres;
let pgPort: number;
let server: Awaited<ReturnType<typeof startTestServer>>;
let gina: RuntimePerson;
let env: TestEnvironment;
/** Activated first, then superseded by `active`. */
let superseded: RuntimeClient;
/** The holder of gina's lease. */
let active: RuntimeClient;
/** Created, never activated. */
let standby: RuntimeClient;
/** A page with a token minted before the outage and no session yet. */
let fresh: RuntimeClient;
/** A page of another Environment, signed in before the outage, whose origin this node has never looked up. */
let unseen: RuntimeClient;
/** A grant issued to `active` before the outage. */
let issued: { grant: string; grantId: string };
/** A control token of `active`'s session, issued before the outage. */
let controlToken: string;
const pgLog: string[] = [];

async function startPostgres(port?: number): Promise<RunningPostgres> {
  return startEmbeddedPostgres({
    directory: pgDir,
    ...(port === undefined ? {} : { port }),
    onLog: (line) => {
      // Kept for the failure message of a start that does not come up; the last lines are the ones that matter.
      pgLog.push(line);
      if (pgLog.length > 200) pgLog.shift();
    },
  });
}

const grant = (client: RuntimeClient) => client.fenced('/v1/runtime/environment-backend/grants', { method: 'POST', body: { scopes: ['a:read'] } });
const introspect = (token: string) =>
  fetch(`${server.url}/v1/runtime/environment-backend/grants/introspect`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant: token, endpoint: ENDPOINT }),
  });

/**
 * A WebSocket upgrade as a Response: a refused upgrade is an HTTP answer (status, headers, Problem body); an accepted
 * one is closed at once and reported as an error, since nothing should be admitted during an outage.
 */
function upgrade(url: string, protocols: string[], origin: string): Promise<Response> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { origin });
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') headers.set(name, value);
        resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 0, headers }));
      });
    });
    ws.on('open', () => {
      ws.close();
      reject(new Error(`the upgrade to ${new URL(url).pathname} was accepted`));
    });
    ws.on('error', reject);
  });
}

/** Every Runtime call the outage must refuse, each from the page it belongs to. */
const runtimeCalls: ReadonlyArray<readonly [string, () => Promise<Response>]> = [
  ['create session', () => fresh.createSession()],
  // The gateway looks up a page's origin before anything else; that lookup failing is the same outage.
  ['create session (an origin not looked up yet)', () => unseen.createSession()],
  [
    'preflight of a Runtime call (an origin not looked up yet)',
    () => fetch(`${server.url}/v1/runtime/session`, { method: 'OPTIONS', headers: { origin: unseen.origin, 'access-control-request-method': 'POST' } }),
  ],
  ['read session (active)', () => active.read()],
  ['read session (standby)', () => standby.read()],
  ['activate standby', () => standby.activate()],
  ['activate superseded', () => superseded.activate()],
  ['activate the holder again', () => active.activate()],
  ['fenced call (issue grant)', () => grant(active)],
  ['grant introspection', () => introspect(issued.grant)],
  ['revoke grant', () => fetch(`${server.url}/v1/runtime/environment-backend/grants/${issued.grantId}`, { method: 'DELETE', headers: active.headers() })],
  ['control token', () => active.controlToken()],
  ['release', () => standby.release()],
  ['plugin settings (fenced)', () => active.fenced('/v1/runtime/plugins/plg_media/settings')],
  ['runtime socket upgrade', () => upgrade(active.socketUrl(), RuntimeClient.subprotocols(active.accessToken), active.origin)],
  ['control socket upgrade', () => upgrade(`${server.url.replace(/^http/, 'ws')}/v1/runtime/control`, RuntimeClient.subprotocols(controlToken), active.origin)],
];

/** Runs one call, failing (rather than hanging) past HANG_MS; returns its response and how long it took. */
async function timed(what: string, call: () => Promise<Response>): Promise<{ res: Response; ms: number }> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer after ${HANG_MS} ms (hangs)`)), HANG_MS);
  });
  try {
    const res = await Promise.race([call(), hang]);
    // The body is part of the answer: a response whose body never ends hangs as much as one that never starts.
    await Promise.race([res.clone().arrayBuffer(), hang]);
    return { res, ms: performance.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

async function assertUnavailable(what: string, call: () => Promise<Response>): Promise<void> {
  const { res, ms } = await timed(what, call);
  try {
    await assertProblem(res, 503, 'runtime_coordination_unavailable');
  } catch (error) {
    throw new Error(`${what}: ${(error as Error).message}`, { cause: error });
  }
  assert.ok(Number(res.headers.get('retry-after')) > 0, `${what}: Retry-After missing (${res.headers.get('retry-after')})`);
  assert.ok(ms < PROMPT_MS, `${what}: answered after ${Math.round(ms)} ms, more than ${PROMPT_MS}`);
}

/** The whole catalogue, one call after another, then all at once (a burst must not hang on the pool either). */
async function assertAllUnavailable(): Promise<void> {
  for (const [what, call] of runtimeCalls) await assertUnavailable(what, call);
  await Promise.all(runtimeCalls.map(([what, call]) => assertUnavailable(`${what} (concurrent)`, call)));
}

/** Nobody was admitted during the outage: the holder, its lease and its grant are exactly as before. */
async function assertNothingChanged(lease: { leaseId: string; leaseVersion: number }): Promise<void> {
  const read = await active.read();
  assert.is(read.status, 200, await read.clone().text());
  const body = (await jsonOf(read)) as { status: string; lease: { leaseId: string; leaseVersion: number } | null };
  assert.is(body.status, 'active');
  assert.equal(body.lease && { leaseId: body.lease.leaseId, leaseVersion: body.lease.leaseVersion }, lease);
  assert.is(await sessionState(standby), 'standby');
  assert.is(await sessionState(superseded), 'superseded');
  assert.is((await jsonOf(await introspect(issued.grant))).active, true);
}

/**
 * The pids of `pid`'s children that have not exited (a zombie has: nobody may reap children reparented to a container's
 * pid 1). Read from /proc, which is where the test runs (Linux).
 */
async function liveChildrenOf(pid: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => undefined);
    if (stat === undefined) continue;
    // The command name in parentheses may hold spaces and parentheses; state and ppid follow the last ')'.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(ppid) === pid && state !== 'Z') children.push(Number(entry));
  }
  return children;
}

async function exited(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat === undefined || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}

/** Starts Postgres again on the same directory and port, retrying while the old cluster still holds either. */
async function restartPostgres(timeoutMs: number): Promise<RunningPostgres> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await startPostgres(pgPort);
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`Postgres did not restart:\n${pgLog.slice(-20).join('\n')}`, { cause: error });
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** Postgres is back when the server answers a Runtime read again (the pool reconnects on its own). */
async function waitServing(): Promise<void> {
  await waitFor(async () => (await active.read()).status === 200, 'the server to serve Runtime calls again', 20_000);
}

test.before(async () => {
  pgDir = await mkdtemp(path.join(tmpdir(), 'registry-outage-pg-'));
  // As root, Postgres runs as its own user, which must be able to enter the directory.
  await chmod(pgDir, 0o711);
  postgres = await startPostgres();
  // The restart must come back on the same port: the server's pool keeps the connection string it was given.
  pgPort = Number(new URL(postgres.connectionString).port);
  const admin = new pg.Client({ connectionString: postgres.connectionString });
  await admin.connect();
  try {
    await admin.query('CREATE DATABASE registry');
  } finally {
    await admin.end();
  }
  // The pages opened here must still hold (or not hold) their leases after two outages and restarts.
  server = await startTestServer(postgres.urlFor('registry'), productParts, LONG_LEASE_ENV);
  gina = await runtimePerson(server, 'gina');
  env = await testEnvironment(server.opsUrl, 'outage-world', 'gina');
  const declared = await declareBackend(server.opsUrl, env.environmentId, { endpoint: ENDPOINT, scopes: ['a:read'] });
  assert.is(declared.status, 200, await declared.clone().text());
  superseded = await (await gina.runtime(env)).open();
  active = await (await gina.runtime(env)).open();
  standby = await gina.runtime(env);
  assert.is((await standby.createSession()).status, 201);
  fresh = await gina.runtime(env);
  unseen = await gina.runtime(await testEnvironment(server.opsUrl, 'outage-unseen', 'gina'));
  const made = await grant(active);
  assert.is(made.status, 201, await made.clone().text());
  issued = (await made.json()) as { grant: string; grantId: string };
  const control = await active.controlToken();
  assert.is(control.status, 200, await control.clone().text());
  controlToken = String((await jsonOf(control)).controlToken);
});

test.after(async () => {
  // Postgres is up again here unless a test failed midway; stopping the server then only logs its failed cleanups.
  await server?.stop('test over');
  await postgres?.stop();
  await rm(pgDir, { recursive: true, force: true });
});

test('with Postgres up: one holder, one standby, one superseded page, a live grant', async () => {
  assert.ok(active.lease);
  await assertNothingChanged(active.lease);
});

test('Postgres stopped: every Runtime call answers 503 runtime_coordination_unavailable at once; it serves again on restart', async () => {
  const lease = active.lease!;
  await postgres.stop();
  try {
    await assertAllUnavailable();
    // Still refused a while later: the answer does not depend on how the pool happened to notice.
    await new Promise((r) => setTimeout(r, 500));
    await assertUnavailable('read session (later)', () => active.read());
    // Outside the Runtime plane an outage is a retryable 503 too, never a 500: the operator's inspection reads.
    for (const path of ['/actors/runtime-session/rts_00000000000000000000000000', '/actors/runtime-session/rts_00000000000000000000000000/journal']) {
      const res = await fetch(server.opsUrl + path);
      assert.is(res.status, 503, `${path}: ${await res.clone().text()}`);
      assert.is(((await res.json()) as { code: string }).code, 'storage_unavailable');
    }
  } finally {
    // Back up even when an assertion failed, so the next test starts from a running Postgres.
    postgres = await restartPostgres(5_000);
  }
  await waitServing();
  await assertNothingChanged(lease);
  const again = await grant(active);
  assert.is(again.status, 201, await again.clone().text());
});

test('the postmaster killed: still 503 runtime_coordination_unavailable; after crash recovery the server serves again', async () => {
  const lease = active.lease!;
  const pid = Number((await readFile(path.join(pgDir, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const cluster = [pid, ...(await liveChildrenOf(pid))];
  assert.ok(cluster.length > 1, 'the postmaster has no backends to outlive it');
  process.kill(pid, 'SIGKILL');
  try {
    // A backend serves its connection until it notices the postmaster is gone (asynchronously, a few ms later), and a
    // commit it makes meanwhile is durable: Postgres is gone once its processes are, which is when the server must refuse.
    await waitFor(async () => (await Promise.all(cluster.map(exited))).every(Boolean), 'the killed cluster\'s backends to exit', 10_000);
    await assertAllUnavailable();
  } finally {
    // The killed postmaster's backends exit when they notice it is gone; until then a new one refuses the directory.
    postgres = await restartPostgres(30_000);
  }
  await waitServing();
  await assertNothingChanged(lease);

  // Admission works again: a new page opens, supersedes the holder, and the old fence is refused.
  const created = await fresh.createSession();
  assert.is(created.status, 201, await created.clone().text());
  const activated = await fresh.activate();
  assert.is(activated.status, 200, await activated.clone().text());
  assert.ok(fresh.lease!.leaseVersion > lease.leaseVersion);
  await assertProblem(await grant(active), 409, 'runtime_session_superseded');
  assert.is((await grant(fresh)).status, 201);
});

test.run();
