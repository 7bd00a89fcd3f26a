import { test } from 'uvu';
import { fillPath, fuzzSeed, PATH_VALUES, queryCases, Rng, type Operation } from '../support/fuzz.js';
import { endsCredentials, fuzzTarget, type FuzzRequest } from '../support/fuzz-server.js';

/**
 * Request targets no client should send, for every operation of the served OpenAPI document, with and without real
 * credentials: path parameters empty-ish, long, with encoded slashes, dots, NUL and broken encodings; query strings
 * repeated, unknown, unencoded; methods and path spellings no route has. No answer is a 5xx, every refusal is in the
 * error format.
 */
const target = fuzzTarget(test, 'fuzz-paths-queries', 'pathfuzzer');


/** A request for `op` at `requestTarget`, signed with the person's credentials when `authenticated`. */
function planned(op: Operation, name: string, requestTarget: string, authenticated: boolean, method = op.method): FuzzRequest {
  return {
    name,
    op,
    request: async () => {
      const auth = authenticated ? ((await target().credentials.headersFor(op.security, method, requestTarget, undefined)) ?? []) : [];
      return { method, target: requestTarget, headers: auth };
    },
  };
}

const usable = (authenticated: boolean) => (op: Operation) => !authenticated || (op.security.length > 0 && !endsCredentials(op));

function pathRequests(authenticated: boolean, rng: Rng): FuzzRequest[] {
  const out: FuzzRequest[] = [];
  for (const op of target().operations.filter(usable(authenticated))) {
    for (const name of [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)) {
      for (const value of PATH_VALUES) out.push(planned(op, `{${name}}=${value.slice(0, 20)}`, fillPath(op.path, { pluginId: 'plg_media', [name]: value }), authenticated));
    }
    // Values the schemas accept, so the handler runs: at their bounds and at random.
    for (const mode of ['min', 'max', 'random', 'random', 'random'] as const) {
      if (op.path.includes('{')) out.push(planned(op, `${mode} valid path`, target().validPath(op, mode, rng), authenticated));
    }
  }
  return out;
}

function queryRequests(authenticated: boolean, rng: Rng): FuzzRequest[] {
  const out: FuzzRequest[] = [];
  for (const op of target().operations.filter(usable(authenticated))) {
    const path = fillPath(op.path, { pluginId: 'plg_media' });
    for (const query of queryCases(op.parameters, rng, 8)) out.push(planned(op, `query ${query.slice(0, 40)}`, `${path}${query}`, authenticated));
  }
  return out;
}

/**
 * A live authorization request (the person's Environment) with one parameter replaced, repeated or dropped at a time:
 * the authorization endpoint answers such refusals itself (a page, or a redirect to the client), so they reach its
 * handler rather than the gateway's validation.
 */
function authorizationRequests(authenticated: boolean): FuzzRequest[] {
  const { operations, credentials } = target();
  const op = operations.find((o) => o.operationId === 'authorize')!;
  const names = [...op.parameters.filter((p) => p.in === 'query').map((p) => p.name), 'unknown'];
  const values = ['', '%00', '%ED%A0%80', '%FF', 'x'.repeat(3000), '1e309', '-0', '9007199254740993', 'https://evil.example/cb', 'javascript:alert(1)', '%2F..%2F', 'a+b', 'é', '"<>', 'none', 'login+consent', 'openid%20openid'];
  const out: FuzzRequest[] = [];
  for (const name of names) {
    const variants = [...values.map((v) => [`=${v}`, v] as const), ['dropped', undefined] as const, ['repeated', 'repeat'] as const];
    for (const [label, value] of variants) {
      out.push({
        name: `authorize ${name}${label.slice(0, 20)}`,
        op,
        request: async () => {
          const query = Object.entries(credentials.authorizationQuery()).filter(([k]) => k !== name || value === 'repeat').map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
          if (value === 'repeat') query.push(`${name}=${name === 'unknown' ? 'x' : encodeURIComponent(credentials.authorizationQuery()[name] ?? 'x')}`);
          else if (value !== undefined) query.push(`${name}=${value}`);
          const requestTarget = `${op.path}?${query.join('&')}`;
          const cookie = authenticated ? ((await credentials.headersFor([['pageSession']], op.method, requestTarget, undefined)) ?? []) : [];
          return { method: op.method, target: requestTarget, headers: cookie };
        },
      });
    }
  }
  return out;
}

/**
 * Spellings of each operation's path and method that no route has, or that a lenient router might still match; and
 * requests uWebSockets.js cannot parse, which get no response (docs/decisions.md, Gateway: Errors).
 */
function spellingRequests(): FuzzRequest[] {
  const out: FuzzRequest[] = [];
  for (const [index, op] of target().operations.entries()) {
    const path = fillPath(op.path, { pluginId: 'plg_media' });
    const spellings = [`${path}/`, `/${path}`, path.replace('/v1/', '/v1//'), path.replace('/v1/', '/v1/./'), path.replace('/v1/', '/v1/x/../'), path.toUpperCase(), `${path}%2F`, `${path};a=b`, `${path}%00`, `${path}#f`];
    for (const spelling of spellings) out.push(planned(op, `path ${spelling.slice(0, 40)}`, spelling, false));
    for (const method of ['PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'PUT', 'DELETE']) out.push(planned(op, `method ${method}`, path, false, method));
    const unparsable = [
      planned(op, 'method FOO', path, false, 'FOO'),
      planned(op, 'method get', path, false, 'get'),
      planned(op, 'absolute-form target', `http://127.0.0.1${path}`, false),
      planned(op, 'space in the target', `${path}?a=b c`, false),
      { name: 'NUL in a header value', op, request: async () => ({ method: op.method, target: path, headers: [['X-Odd', 'a\u0000b']] as Array<[string, string]> }) },
    ];
    // uWS refuses these before any route is matched: a few operations show it as well as all of them would.
    if (index % 12 === 0) out.push(...unparsable.map((p) => ({ ...p, unparsable: true })));
  }
  return out;
}

test('mutated path parameters, without credentials', async () => {
  const seed = fuzzSeed(0x5eed13);
  await target().fuzz('path-anonymous', seed, pathRequests(false, new Rng(seed)));
});

test('mutated path parameters, with real credentials', async () => {
  const seed = fuzzSeed(0x5eed14);
  await target().fuzz('path-authenticated', seed, pathRequests(true, new Rng(seed)));
});

test('mutated query strings, without credentials', async () => {
  const seed = fuzzSeed(0x5eed11);
  await target().fuzz('query-anonymous', seed, queryRequests(false, new Rng(seed)));
});

test('mutated query strings, with real credentials', async () => {
  const seed = fuzzSeed(0x5eed12);
  await target().fuzz('query-authenticated', seed, queryRequests(true, new Rng(seed)));
});

test('a live authorization request with one parameter broken, with and without the page session', async () => {
  await target().fuzz('authorize-anonymous', 0, authorizationRequests(false));
  await target().fuzz('authorize-page-session', 0, authorizationRequests(true));
});

test('path spellings and methods no route has', async () => {
  await target().fuzz('spelling-anonymous', 0, spellingRequests());
});

test.run();
