import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { mintFuzzCredentials, type FuzzCredentials } from './fuzz-credentials.js';
import { exampleOf, fillPath, servedOperations, type ExampleMode, type JsonSchema, type Operation, type Rng } from './fuzz.js';
import { FuzzTally, type RawRequest } from './fuzz-wire.js';
import { captureLogs } from './log-capture.js';
import { withTestServer, type TestServer } from './server.js';

/** What a fuzz file works with: the product server, its operations as served, one person's real credentials. */
export interface FuzzTarget {
  readonly server: TestServer;
  readonly operations: readonly Operation[];
  /** The operation's path with each parameter filled by a value its schema accepts (see exampleOf). */
  validPath(op: Operation, mode: ExampleMode, rng: Rng): string;
  /** A value for `schema` (see exampleOf). */
  example(schema: JsonSchema, mode?: ExampleMode, rng?: Rng): unknown;
  readonly credentials: FuzzCredentials;
  /** Sends `requests` (at most 8 in flight), records the count under `area`, and fails on any broken rule. */
  fuzz(area: string, seed: number, requests: ReadonlyArray<FuzzRequest>): Promise<void>;
}

/** One planned request; `unparsable` as in FuzzTally.check. */
export interface FuzzRequest {
  readonly name: string;
  readonly op: Operation;
  readonly request: () => Promise<RawRequest>;
  readonly unparsable?: boolean;
}

/** Operations whose success would end the credentials the rest of a file uses: fuzzed without them. */
export const ENDS_CREDENTIALS: ReadonlySet<string> = new Set([
  'POST /v1/account/devices/revoke-all',
  'POST /v1/account/sign-out',
  'POST /v1/auth/logout',
  'POST /v1/runtime/session/activate',
  'POST /v1/runtime/session/release',
]);

export const endsCredentials = (op: Operation): boolean => ENDS_CREDENTIALS.has(`${op.method} ${op.path}`);

/**
 * Starts the product server for `suite` (with `env`) under a log capture, reads its OpenAPI document and mints
 * credentials for `handle`. After the suite, prints the requests sent per area (the file's reach, for reports).
 */
export function fuzzTarget(suite: Test, file: string, handle: string, env: Record<string, string> = {}): () => FuzzTarget {
  // Debug: the per-request lines are there, so the test sees that it watches the log the server writes.
  const { logger, lines } = captureLogs('debug');
  let server: TestServer | undefined;
  let target: FuzzTarget | undefined;
  const counts: Record<string, number> = {};
  withTestServer(suite, (started) => (server = started.server), productParts, env, undefined, logger);
  suite.before(async () => {
    const running = server!;
    const { operations, resolve } = await servedOperations(running.url);
    const credentials = await mintFuzzCredentials(running, handle);
    target = {
      server: running,
      operations,
      example: (schema, mode, rng) => exampleOf(schema, resolve, mode, rng),
      validPath: (op, mode, rng) =>
        fillPath(op.path, Object.fromEntries(op.parameters.filter((p) => p.in === 'path').map((p) => [p.name, encodeURIComponent(String(exampleOf(p.schema, resolve, mode, rng)))]))),
      credentials,
      fuzz: async (area, seed, requests) => {
        const tally = new FuzzTally(running.port, seed);
        const logged = lines.length;
        let next = 0;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            while (next < requests.length) {
              const { name, op, request, unparsable } = requests[next++]!;
              await tally.check(`${op.operationId} ${name}`, await request(), op.statuses, unparsable);
            }
          }),
        );
        counts[area] = (counts[area] ?? 0) + tally.sent;
        if (process.env.FUZZ_OUTCOMES) console.log(area, JSON.stringify(Object.fromEntries(tally.outcomes)));
        assert.is(tally.failures.length, 0, tally.report());
        const ready = await fetch(`${running.url}/ready`);
        assert.is(ready.status, 200, 'the server answers /ready after the fuzz');
        const linesOfArea = lines.slice(logged);
        assert.ok(linesOfArea.some((l) => l.msg === 'request'), 'the request log is captured');
        assert.equal(linesOfArea.filter((l) => l.level >= 50 || (l.msg === 'request' && Number(l.status) >= 500 && Number(l.status) !== 503)), [], 'client input logged as a server error');
      },
    };
  });
  suite.after(() => {
    console.log(`${file} requests sent: ${JSON.stringify(counts)}`);
    if (process.env.FUZZ_OUTCOMES) for (const line of new Set(lines.filter((l) => l.level >= 40).map((l) => `${l.level} ${l.msg ?? ''}`))) console.log('logged', line);
  });
  return () => {
    if (!target) throw new Error('the fuzz target is ready once the suite has started');
    return target;
  };
}
