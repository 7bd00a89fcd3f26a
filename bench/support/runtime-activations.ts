/** Part a of bench/runtime.bench.ts: session activations over HTTP (see the comment at the top of that file). */
import { KeepAliveClient, runClosedLoop, type ClosedLoopResult } from './http-load.js';
import { count, ms } from './report-format.js';
import {
  activate,
  config,
  createSession,
  eachConcurrent,
  log,
  makePeople,
  profiledWindow,
  runtimeHeaders,
  windowCpu,
  type CpuShares,
  type Person,
  type Profiled,
  type RuntimeServer,
} from './runtime-bench.js';

export interface HttpRow {
  readonly name: string;
  readonly result: ClosedLoopResult;
  readonly cpu: CpuShares | undefined;
}

export interface ActivationReport {
  readonly setup: { readonly principalsPerSec: number; readonly sessionsPerSec: number };
  readonly statusRuns: readonly HttpRow[];
  readonly rows: readonly HttpRow[];
  readonly baseline: HttpRow;
  /** With BENCH_PROFILE=1: one more evicting window, profiled. */
  readonly profile: (Profiled & { readonly result: ClosedLoopResult }) | undefined;
}

export async function partActivations(server: RuntimeServer): Promise<ActivationReport> {
  const environment = await server.request('environment', { environmentId: 'bench-a' });
  let started = performance.now();
  const principals = await makePeople(server, environment, 'pa', config.principals);
  const principalsPerSec = principals.length / ((performance.now() - started) / 1000);
  const client = new KeepAliveClient(`http://127.0.0.1:${server.info.port}`, config.concurrency);
  try {
    started = performance.now();
    const people: Person[] = principals.map((principal) => ({ principal, sessions: [], holder: -1, busy: false }));
    await eachConcurrent(people, config.concurrency, async (person) => {
      person.sessions.push(await createSession(client, environment, person.principal.accessToken), await createSession(client, environment, person.principal.accessToken));
    });
    const sessionsPerSec = (2 * people.length) / ((performance.now() - started) / 1000);
    // Priming: every person's second session takes the lease once, so each activation of the window evicts.
    await eachConcurrent(people, config.concurrency, async (person) => {
      await activate(client, environment, person.principal.accessToken, person.sessions[1]!);
      person.holder = 1;
    });
    log(`a: ${people.length} people, ${2 * people.length} sessions, primed`);

    // One request per person at a time: with fewer people than workers, the workers are fewer.
    const concurrency = Math.min(config.concurrency, people.length);
    let cursor = 0;
    const nextPerson = (): Person => {
      for (let tried = 0; tried < people.length; tried++) {
        const person = people[cursor++ % people.length]!;
        if (!person.busy) return person;
      }
      throw new Error('every person has a request in flight');
    };
    const measure = async (name: string, op: () => Promise<void>): Promise<HttpRow> => {
      const cpu = windowCpu(server.pid);
      const result = await runClosedLoop({ concurrency, warmupMs: config.warmupMs, durationMs: config.durationMs, op, hooks: cpu.hooks });
      log(`a: ${name}: ${count(result.perSec)}/s, p99 ${ms(result.latency.p99)} ms, ${result.failures} failed`);
      return { name, result, cpu: cpu.read() };
    };
    const status = (): Promise<HttpRow> =>
      measure('GET /v1/status', async () => {
        const res = await client.request('GET', '/v1/status');
        if (res.status !== 200) throw new Error(`status: ${res.status} ${res.body.slice(0, 300)}`);
      });
    const activation = (choose: (person: Person) => number) => async (): Promise<void> => {
      const person = nextPerson();
      person.busy = true;
      try {
        const target = choose(person);
        await activate(client, environment, person.principal.accessToken, person.sessions[target]!);
        person.holder = target;
      } finally {
        person.busy = false;
      }
    };

    const statusBefore = await status();
    const read = await measure('GET /v1/runtime/session', async () => {
      const person = nextPerson();
      const res = await client.request('GET', '/v1/runtime/session', runtimeHeaders(environment, person.principal.accessToken, person.sessions[person.holder]!));
      if (res.status !== 200) throw new Error(`session read: ${res.status} ${res.body.slice(0, 300)}`);
    });
    const evict = await measure('activate, evicting', activation((person) => 1 - person.holder));
    const holder = await measure('activate, holder', activation((person) => person.holder));
    const statusAfter = await status();
    const baseline = statusAfter.result.perSec > statusBefore.result.perSec ? statusAfter : statusBefore;
    let profile: ActivationReport['profile'];
    if (config.profile === '1') {
      const profiled = await profiledWindow(server, 'activations', (hooks) =>
        runClosedLoop({ concurrency, warmupMs: config.warmupMs, durationMs: config.durationMs, op: activation((person) => 1 - person.holder), hooks }),
      );
      profile = { ...profiled.profile, result: profiled.result };
    }
    return { setup: { principalsPerSec, sessionsPerSec }, statusRuns: [statusBefore, statusAfter], rows: [baseline, read, evict, holder], baseline, profile };
  } finally {
    client.close();
  }
}
