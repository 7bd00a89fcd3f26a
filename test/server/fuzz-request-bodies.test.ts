import { test } from 'uvu';
import { fillPath, formBodyCases, type ExampleMode, fuzzSeed, jsonBodyCases, Rng, type BodyCase, type Operation } from '../support/fuzz.js';
import type { RawRequest } from '../support/fuzz-wire.js';
import { endsCredentials, fuzzTarget } from '../support/fuzz-server.js';

/**
 * Request bodies that break each operation's schema, encoding or framing, for every operation of the served OpenAPI
 * document, with and without real credentials: no answer is a 5xx, every refusal is in the error format, and nothing
 * a client sends is logged as a server error.
 */
/** Lower than the default so the largest cases (64 KiB of nesting is 32,768 levels) cost little. */
const MAX_BODY_BYTES = Number(process.env.FUZZ_MAX_BODY ?? 64 * 1024);
const target = fuzzTarget(test, 'fuzz-request-bodies', 'bodyfuzzer', { MAX_BODY_BYTES: String(MAX_BODY_BYTES) });

/** A live authorization page's form, for the form post's cases: with its CSRF token they reach the handler. */
let authorizationForm: Record<string, string> | undefined;

function casesOf(op: Operation, rng: Rng, random: number, mode: ExampleMode): BodyCase[] {
  if (!op.body) return jsonBodyCases({ unexpected: true }, rng, 0, MAX_BODY_BYTES).filter((c) => c.body.length > 0);
  const base = target().example(op.body.schema, mode, rng);
  if (mode !== 'rough') {
    // Accepted as it is (the handler runs), then each with one member broken.
    const valid: BodyCase = { name: `${mode} valid body`, body: JSON.stringify(base), contentType: op.body.mediaType };
    return [valid, ...jsonBodyCases(base, rng, random, MAX_BODY_BYTES).slice(-random)];
  }
  if (op.body.mediaType === 'application/x-www-form-urlencoded') {
    const live = op.operationId === 'decideAuthorization' ? authorizationForm : undefined;
    const form = live ?? Object.fromEntries(Object.entries(base as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
    return formBodyCases(form, rng, random, MAX_BODY_BYTES);
  }
  return jsonBodyCases(base, rng, random, MAX_BODY_BYTES);
}

async function fuzzBodies(area: string, select: (op: Operation) => boolean, authenticated: boolean, seed: number, random: number, modes: readonly ExampleMode[] = ['rough']): Promise<void> {
  const { operations, credentials, fuzz } = target();
  const rng = new Rng(seed);
  const requests: Array<{ name: string; op: Operation; request: () => Promise<RawRequest> }> = [];
  for (const op of operations.filter(select)) {
    if (authenticated && (op.security.length === 0 || endsCredentials(op))) continue;
    for (const mode of modes) {
      const path = mode === 'rough' ? fillPath(op.path, { pluginId: 'plg_media' }) : target().validPath(op, mode, rng);
      for (const c of casesOf(op, rng, random, mode)) {
        const contentType: Array<[string, string]> = c.contentType === undefined ? [] : [['Content-Type', c.contentType]];
        const request = async (): Promise<RawRequest> => {
          const auth = authenticated ? ((await credentials.headersFor(op.security, op.method, path, c.body)) ?? []) : [];
          return { method: op.method, target: path, headers: [...auth, ...contentType], body: c.body };
        };
        requests.push({ name: c.name, op, request });
      }
    }
  }
  await fuzz(area, seed, requests);
}

const jsonBody = (op: Operation): boolean => op.body?.mediaType === 'application/json';
const formBody = (op: Operation): boolean => op.body?.mediaType === 'application/x-www-form-urlencoded';

test('JSON bodies that break each operation schema, without credentials', async () => {
  await fuzzBodies('json-anonymous', jsonBody, false, fuzzSeed(0x5eed01), 12);
});

test('JSON bodies that break each operation schema, with real credentials', async () => {
  await fuzzBodies('json-authenticated', jsonBody, true, fuzzSeed(0x5eed02), 12);
});

test('JSON bodies the schema accepts (at its lower and upper bounds, at random), and each with one member broken, with real credentials', async () => {
  await fuzzBodies('json-valid-authenticated', jsonBody, true, fuzzSeed(0x5eed07), 6, ['min', 'max', 'random', 'random', 'random']);
});

test('JSON bodies the schema accepts, and each with one member broken, without credentials', async () => {
  await fuzzBodies('json-valid-anonymous', (op) => jsonBody(op) && op.security.length === 0, false, fuzzSeed(0x5eed08), 6, ['min', 'max', 'random', 'random', 'random']);
});

test('form bodies (token endpoint, authorization form post), with and without credentials', async () => {
  authorizationForm = await target().credentials.authorizationForm();
  await fuzzBodies('form-anonymous', formBody, false, fuzzSeed(0x5eed03), 30);
  await fuzzBodies('form-authenticated', formBody, true, fuzzSeed(0x5eed04), 30);
});

test('token requests with a live authorization code or refresh token, one parameter broken at a time', async () => {
  const { operations, credentials, fuzz } = target();
  const op = operations.find((o) => o.operationId === 'token')!;
  const { code, refresh } = await credentials.tokenForms();
  const rng = new Rng(fuzzSeed(0x5eed09));
  const requests = [...formBodyCases(code, rng, 40, MAX_BODY_BYTES), ...formBodyCases(refresh, rng, 40, MAX_BODY_BYTES)].map((c) => ({
    name: c.name,
    op,
    request: async (): Promise<RawRequest> => ({ method: op.method, target: op.path, headers: c.contentType === undefined ? [] : [['Content-Type', c.contentType]], body: c.body }),
  }));
  await fuzz('token-live', 0, requests);
});

test('a body sent to an operation that takes none, with and without credentials', async () => {
  await fuzzBodies('bodiless-anonymous', (op) => !op.body, false, fuzzSeed(0x5eed05), 0);
  await fuzzBodies('bodiless-authenticated', (op) => !op.body, true, fuzzSeed(0x5eed06), 0);
});

test.run();
