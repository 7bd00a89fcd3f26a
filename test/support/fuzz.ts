/**
 * Route-table-driven fuzzing through the real server: the operations come from the served OpenAPI document (which the
 * gateway generates from its route table), and the cases from their schemas. Deterministic: every choice comes from a
 * seeded generator, and a violation names the seed and the request. How requests are sent and answers judged:
 * fuzz-wire.ts.
 */

/** mulberry32: small, seedable, good enough to pick mutations. */
export class Rng {
  #state: number;
  constructor(readonly seed: number) {
    this.#state = seed >>> 0;
  }
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(below: number): number {
    return Math.floor(this.next() * below);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

/** The seed of a run: FUZZ_SEED to replay one, a fixed one otherwise (CI runs the same requests every time). */
export const fuzzSeed = (fallback: number): number => (process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : fallback);

export type JsonSchema = Readonly<Record<string, unknown>>;

export interface Parameter {
  readonly name: string;
  readonly in: 'path' | 'query' | 'header' | 'cookie';
  readonly required: boolean;
  readonly schema: JsonSchema;
}

export interface Operation {
  readonly operationId: string;
  readonly method: string;
  readonly path: string;
  readonly parameters: readonly Parameter[];
  /** The request body's media type and schema (references resolved), when the operation takes one. */
  readonly body?: { readonly mediaType: string; readonly schema: JsonSchema };
  /** Security requirements, each a list of scheme names that go together; empty for none. */
  readonly security: readonly (readonly string[])[];
  readonly statuses: ReadonlySet<number>;
}

interface OpenApiDocument {
  readonly paths: Record<string, Record<string, unknown>>;
  readonly components: { readonly schemas: Record<string, JsonSchema> };
}

/** Every operation of the served OpenAPI document. */
export async function servedOperations(baseUrl: string): Promise<{ operations: Operation[]; resolve: (schema: JsonSchema) => JsonSchema }> {
  const doc = (await (await fetch(`${baseUrl}/v1/openapi.json`)).json()) as OpenApiDocument;
  const resolve = (schema: JsonSchema): JsonSchema => {
    const ref = schema.$ref;
    return typeof ref === 'string' ? resolve(doc.components.schemas[ref.split('/').pop()!] ?? {}) : schema;
  };
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(item)) {
      const op = raw as Record<string, unknown>;
      if (typeof op !== 'object' || op === null || typeof op.operationId !== 'string') continue;
      const content = (op.requestBody as { content?: Record<string, { schema: JsonSchema }> } | undefined)?.content;
      const [mediaType, media] = Object.entries(content ?? {})[0] ?? [];
      operations.push({
        operationId: op.operationId,
        method: method.toUpperCase(),
        path,
        parameters: ((op.parameters ?? []) as Parameter[]).map((p) => ({ ...p, required: p.required === true })),
        ...(mediaType && media ? { body: { mediaType, schema: resolve(media.schema) } } : {}),
        security: ((op.security ?? []) as Array<Record<string, unknown>>).map((s) => Object.keys(s)),
        statuses: new Set(Object.keys(op.responses as object).map(Number)),
      });
    }
  }
  return { operations, resolve };
}

/**
 * How `exampleOf` fills a schema: `rough` (types only: patterns and bounds are ignored, so most such bodies are
 * refused by validation), or a value the schema accepts at its lower bounds, its upper bounds, or at random within them
 * (these reach the handlers, where an unchecked edge would fail).
 */
export type ExampleMode = 'rough' | 'min' | 'max' | 'random';

/** A value for `schema` in `mode` (see ExampleMode); `rng` for `random`. */
export function exampleOf(schema: JsonSchema, resolve: (schema: JsonSchema) => JsonSchema, mode: ExampleMode = 'rough', rng = new Rng(1), depth = 0): unknown {
  const s = resolve(schema);
  const within = (low: number, high: number): number => (mode === 'max' ? high : mode === 'random' ? low + rng.int(high - low + 1) : low);
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum)) return mode === 'rough' || mode === 'min' ? s.enum[0] : mode === 'max' ? s.enum.at(-1) : rng.pick(s.enum);
  const alternatives = (s.anyOf ?? s.oneOf) as JsonSchema[] | undefined;
  if (alternatives?.[0]) return exampleOf(mode === 'random' ? rng.pick(alternatives) : mode === 'max' ? alternatives.at(-1)! : alternatives[0], resolve, mode, rng, depth + 1);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  if (depth > 6) return null;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      const required = new Set((s.required ?? []) as string[]);
      for (const [name, member] of Object.entries((s.properties ?? {}) as Record<string, JsonSchema>)) {
        if (mode === 'min' && !required.has(name)) continue;
        out[name] = exampleOf(member, resolve, mode, rng, depth + 1);
      }
      return out;
    }
    case 'array': {
      const length = mode === 'rough' ? Math.max(1, Number(s.minItems ?? 1)) : within(Number(s.minItems ?? 0), Math.min(Number(s.maxItems ?? 8), 64));
      return Array.from({ length }, () => exampleOf((s.items ?? {}) as JsonSchema, resolve, mode, rng, depth + 1));
    }
    case 'integer':
    case 'number': {
      const low = Number(s.minimum ?? (s.exclusiveMinimum !== undefined ? Number(s.exclusiveMinimum) + 1 : 0));
      const high = Number(s.maximum ?? (s.exclusiveMaximum !== undefined ? Number(s.exclusiveMaximum) - 1 : Number.MAX_SAFE_INTEGER));
      return mode === 'rough' ? Number(s.minimum ?? 1) : mode === 'random' ? low + Math.floor(rng.next() * Math.min(high - low + 1, 1e6)) : within(low, high);
    }
    case 'boolean':
      return mode === 'random' ? rng.int(2) === 0 : mode !== 'min';
    case 'string': {
      if (s.format === 'date-time') return new Date(mode === 'max' ? 8.64e15 : mode === 'min' ? 0 : Date.now()).toISOString();
      if (mode !== 'rough' && typeof s.pattern === 'string') return stringMatching(s.pattern, mode, rng);
      const low = Math.max(mode === 'rough' ? 1 : 0, Number(s.minLength ?? 0));
      return (mode === 'random' ? 'é' : 'a').repeat(mode === 'rough' ? low : within(low, Math.min(Number(s.maxLength ?? 256), 4096)));
    }
    default:
      return 'x';
  }
}

/**
 * A string matching `pattern` (the subset the API's schemas use: anchors, literals, escapes, classes with ranges,
 * groups with alternatives, `?*+{m,n}`), each repetition at its least, its most (unbounded ones at 8) or at random.
 */
export function stringMatching(pattern: string, mode: 'min' | 'max' | 'random', rng: Rng): string {
  let at = 0;
  const count = (low: number, high: number): number => (mode === 'min' ? low : mode === 'max' ? high : low + rng.int(high - low + 1));
  const atom = (): () => string => {
    const c = pattern[at++]!;
    if (c === '\\') {
      const e = pattern[at++]!;
      if (e === 'd') return () => String(rng.int(10));
      if (e === 'w') return () => rng.pick(['a', 'Z', '_', '7']);
      return () => e;
    }
    if (c === '[') {
      const chars: string[] = [];
      while (pattern[at] !== ']') {
        let first = pattern[at++]!;
        if (first === '\\') first = pattern[at++]!;
        if (pattern[at] === '-' && pattern[at + 1] !== ']') {
          const last = pattern[at + 1]!;
          at += 2;
          for (let code = first.charCodeAt(0); code <= last.charCodeAt(0); code += 1) chars.push(String.fromCharCode(code));
        } else chars.push(first);
      }
      at += 1;
      return () => (mode === 'random' ? rng.pick(chars) : mode === 'max' ? chars.at(-1)! : chars[0]!);
    }
    if (c === '(') {
      if (pattern.startsWith('?:', at)) at += 2;
      const branches: Array<() => string> = [sequence()];
      while (pattern[at] === '|') {
        at += 1;
        branches.push(sequence());
      }
      at += 1;
      return () => (mode === 'random' ? rng.pick(branches) : branches[0]!)();
    }
    return () => c;
  };
  const sequence = (): () => string => {
    const parts: Array<() => string> = [];
    while (at < pattern.length && pattern[at] !== ')' && pattern[at] !== '|') {
      if (pattern[at] === '^' || pattern[at] === '$') {
        at += 1;
        continue;
      }
      const one = atom();
      let [low, high] = [1, 1];
      const q = pattern[at];
      if (q === '?') [low, high] = [0, 1];
      else if (q === '*') [low, high] = [0, 8];
      else if (q === '+') [low, high] = [1, 8];
      else if (q === '{') {
        const close = pattern.indexOf('}', at);
        const [a, b] = pattern.slice(at + 1, close).split(',');
        [low, high] = [Number(a), b === undefined ? Number(a) : b === '' ? Number(a) + 8 : Number(b)];
        at = close;
      }
      if (q === '?' || q === '*' || q === '+' || q === '{') at += 1;
      parts.push(() => Array.from({ length: count(low, high) }, one).join(''));
    }
    return () => parts.map((p) => p()).join('');
  };
  return sequence()();
}

/** Text a well-behaved JSON encoder never produces but a hostile client can: lone surrogates and NUL as escapes. */
const HOSTILE_STRINGS: readonly string[] = [
  '',
  ' ',
  '\\ud800',
  '\\udfff',
  'a\\u0000b',
  '\\ud83d\\ude00',
  '\u202e\u0301\ufeff',
  '\\uffff\\ufffe',
  '../../etc/passwd',
  '%00%2F%2e%2e',
  '__proto__',
  'constructor',
  '1e309',
];
const HOSTILE_NUMBERS: readonly string[] = ['1e309', '-1e309', '-0', '9007199254740993', '-9007199254740993', '1.5', '0.0000001', '1e-400', '123456789012345678901234567890'];

/** A JSON text (not a value: escapes and number spellings must survive as sent). */
export type JsonText = string;

const quote = (raw: string): JsonText => `"${raw.replace(/"/g, '\\"')}"`;

function leafMutation(rng: Rng, maxBytes: number): JsonText {
  switch (rng.int(9)) {
    case 0:
      return quote(rng.pick(HOSTILE_STRINGS));
    case 1:
      return rng.pick(HOSTILE_NUMBERS);
    case 2:
      return rng.pick(['null', 'true', 'false', '[]', '{}', '0', '""']);
    case 3:
      return quote('x'.repeat(Math.max(1, Math.floor(maxBytes * rng.pick([0.25, 0.9, 2])))));
    case 4:
      return deepNesting(rng.pick(['[', '{"a":']), Math.min(Math.floor(maxBytes / 5), rng.pick([64, 1000, 20_000])));
    case 5:
      return `[${Array.from({ length: 2000 }, (_, i) => i).join(',')}]`;
    case 6:
      return '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}';
    case 7:
      return quote('\u0000\u0001\u001f'.replace(/[\u0000-\u001f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
    default:
      return quote('é'.repeat(200) + '\\ud800');
  }
}

function deepNesting(open: '[' | '{"a":', depth: number): JsonText {
  const close = open === '[' ? ']' : '}';
  return `${open.repeat(depth)}1${close.repeat(depth)}`;
}

/** Every member path of a value, for mutating one member at a time. */
function memberPaths(value: unknown, prefix: readonly (string | number)[] = []): Array<readonly (string | number)[]> {
  const out: Array<readonly (string | number)[]> = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...memberPaths(v, [...prefix, i])));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...memberPaths(v, [...prefix, k]));
  return out;
}

/** `value` as JSON with the member at `path` replaced by `replacement` text (or removed when it is undefined). */
function withMember(value: unknown, path: readonly (string | number)[], replacement: JsonText | undefined): JsonText {
  const marker = '\u0001REPLACED\u0001';
  const copy = structuredClone(value) as unknown;
  if (path.length === 0) return replacement ?? '';
  let parent = copy as Record<string | number, unknown>;
  for (const step of path.slice(0, -1)) parent = parent[step] as Record<string | number, unknown>;
  const last = path.at(-1)!;
  if (replacement === undefined) {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
    return JSON.stringify(copy);
  }
  parent[last] = marker;
  return JSON.stringify(copy).replace(JSON.stringify(marker), () => replacement);
}

export interface BodyCase {
  readonly name: string;
  readonly body: string | Buffer;
  readonly contentType?: string;
}

/** Bodies that break a JSON operation's schema, its encoding or its framing, in each way once and then at random. */
export function jsonBodyCases(base: unknown, rng: Rng, count: number, maxBytes: number): BodyCase[] {
  const json = 'application/json';
  const text = JSON.stringify(base) ?? '{}';
  const fixed: BodyCase[] = [
    { name: 'empty body', body: '', contentType: json },
    { name: 'whitespace body', body: '  \r\n ', contentType: json },
    { name: 'not JSON', body: 'hello', contentType: json },
    { name: 'truncated JSON', body: text.slice(0, Math.max(1, text.length - 1)), contentType: json },
    { name: 'trailing garbage', body: `${text} x`, contentType: json },
    { name: 'two documents', body: `${text}${text}`, contentType: json },
    { name: 'BOM first', body: `\ufeff${text}`, contentType: json },
    { name: 'invalid UTF-8', body: Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80]), Buffer.from('"}')]), contentType: json },
    { name: 'raw NUL byte', body: Buffer.from('{"a":"\u0000"}'), contentType: json },
    { name: 'top-level array', body: `[${text}]`, contentType: json },
    { name: 'top-level string', body: '"x"', contentType: json },
    { name: 'top-level null', body: 'null', contentType: json },
    { name: 'top-level 1e309', body: '1e309', contentType: json },
    { name: 'duplicate keys', body: text.startsWith('{') && text.length > 2 ? `{${text.slice(1, -1)},${text.slice(1, -1)}}` : '{"a":1,"a":2}', contentType: json },
    { name: 'duplicate __proto__ keys', body: '{"__proto__":1,"__proto__":{"a":1}}', contentType: json },
    { name: 'extra member', body: text.startsWith('{') && text.length > 2 ? `${text.slice(0, -1)},"unexpected":{"deep":[1]}}` : '{"unexpected":1}', contentType: json },
    { name: 'deep array nesting', body: deepNesting('[', Math.floor(maxBytes / 2) - 2), contentType: json },
    { name: 'deep object nesting', body: deepNesting('{"a":', Math.floor(maxBytes / 6) - 2), contentType: json },
    { name: 'deep nesting inside a member', body: withMember(base, memberPaths(base).at(-1) ?? [], deepNesting('[', Math.floor(maxBytes / 3))), contentType: json },
    { name: 'moderately deep nesting', body: deepNesting('[', 5_000), contentType: json },
    { name: 'huge string', body: quote('x'.repeat(maxBytes - 2)), contentType: json },
    { name: 'over the body limit', body: quote('x'.repeat(maxBytes + 10)), contentType: json },
    { name: 'no content type', body: text },
    { name: 'text/plain', body: text, contentType: 'text/plain' },
    { name: 'form on a JSON route', body: 'a=1&b=2', contentType: 'application/x-www-form-urlencoded' },
    { name: 'multipart', body: '--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--b--\r\n', contentType: 'multipart/form-data; boundary=b' },
    { name: 'JSON with latin1 charset', body: Buffer.from(text.replace(/"$/, 'é"'), 'latin1'), contentType: 'application/json; charset=iso-8859-1' },
    { name: 'JSON with bad parameters', body: text, contentType: 'application/json; charset=; ;=;' },
    { name: 'JSON-ish type', body: text, contentType: 'application/jsonx' },
  ];
  const paths = memberPaths(base);
  const random: BodyCase[] = [];
  for (let i = 0; i < count; i += 1) {
    const path = rng.pick(paths);
    const where = `/${path.join('/')}`;
    if (path.length > 0 && rng.int(5) === 0) {
      random.push({ name: `missing ${where}`, body: withMember(base, path, undefined), contentType: json });
      continue;
    }
    random.push({ name: `${where} replaced`, body: withMember(base, path, leafMutation(rng, Math.min(maxBytes, 16_384))), contentType: json });
  }
  return [...fixed, ...random];
}

/** Form bodies (OAuth's token endpoint, the authorization page's form post). */
export function formBodyCases(base: Record<string, string>, rng: Rng, count: number, maxBytes: number): BodyCase[] {
  const form = 'application/x-www-form-urlencoded';
  const text = new URLSearchParams(base).toString();
  const names = Object.keys(base);
  const fixed: BodyCase[] = [
    { name: 'empty form', body: '', contentType: form },
    { name: 'JSON on a form route', body: JSON.stringify(base), contentType: 'application/json' },
    { name: 'no content type', body: text },
    { name: 'repeated parameter', body: `${text}&${text}`, contentType: form },
    { name: 'unencoded text', body: `${text}&a=b c&&&=&==%&%zz&%%`, contentType: form },
    { name: 'percent-encoded NUL and surrogate', body: `${text}&x=%00%ED%A0%80`, contentType: form },
    { name: 'invalid UTF-8', body: Buffer.concat([Buffer.from(`${text}&x=`), Buffer.from([0xff, 0xc0])]), contentType: form },
    { name: 'huge value', body: `${text}&x=${'y'.repeat(maxBytes - text.length - 10)}`, contentType: form },
    { name: 'over the body limit', body: `x=${'y'.repeat(maxBytes + 10)}`, contentType: form },
    { name: '__proto__ parameter', body: `${text}&__proto__=1&constructor=2`, contentType: form },
    { name: 'form with a charset', body: text, contentType: `${form}; charset=utf-16` },
    { name: 'name without value', body: names.join('&'), contentType: form },
  ];
  const values = ['', '%00', '%ED%A0%80', 'x'.repeat(5000), '1e309', '-0', '%2F..%2F', '\u00e9', '%F0%9F%98%80', '+++', '%'];
  const random: BodyCase[] = [];
  for (let i = 0; i < count; i += 1) {
    const params = Object.entries(base).filter(() => rng.int(6) !== 0);
    const name = rng.pick([...names, 'unknown', '']);
    const encoded = params.map(([k, v]) => `${encodeURIComponent(k)}=${k === name ? rng.pick(values) : encodeURIComponent(v)}`);
    if (!names.includes(name)) encoded.push(`${name}=${rng.pick(values)}`);
    random.push({ name: `form ${name || '(empty name)'} mutated`, body: encoded.join('&'), contentType: form });
  }
  return [...fixed, ...random];
}

/** Path parameter values: empty-ish, long, encoded slashes and dots, NUL, surrogates, odd Unicode. */
export const PATH_VALUES: readonly string[] = [
  '%20',
  '%2F',
  'a%2Fb',
  '..',
  '%2E%2E',
  '.',
  '..%2F..%2Fready',
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%FF%FE',
  '%',
  '%zz',
  '%C0%AF',
  'x'.repeat(5000),
  '%F0%9F%98%80',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  '-1',
  '1e309',
  "a'b\"c",
  'a;b=c',
  'a+b',
  '%25',
];

/**
 * Query strings: unknown, repeated, unencoded, broken encodings, empty names and values. Unencoded means what a lenient
 * client leaves as is and a request line can still carry; a space or a control character ends the request target.
 */
export function queryCases(parameters: readonly Parameter[], rng: Rng, count: number): string[] {
  const names = parameters.filter((p) => p.in === 'query').map((p) => p.name);
  const fixed = ['?', '??', '?&&&', '?=', '?=x', '?a', '?unknown=1', '?a=1&a=2&a=3', '?%', '?%zz=1', '?a=%00', '?a=%ED%A0%80', '?a=%FF', `?a=${'x'.repeat(6000)}`, '?a=b+c%20d', '?a="<>`{}|\\^', '?a=é', '?__proto__=1', '?#frag'];
  const values = ['', '%00', '%ED%A0%80', 'x'.repeat(3000), '1e309', '-0', '9007199254740993', 'true', '[]', '%', 'a+b', 'é', '%2F..'];
  const random: string[] = [];
  for (let i = 0; i < count && names.length > 0; i += 1) {
    const picked = Array.from({ length: 1 + rng.int(4) }, () => `${rng.pick([...names, 'unknown'])}=${rng.pick(values)}`);
    random.push(`?${picked.join('&')}`);
  }
  return [...fixed, ...random];
}

/** The path with each `{name}` replaced by `values[name]` (or a harmless stand-in). */
export const fillPath = (template: string, values: Readonly<Record<string, string>> = {}): string =>
  template.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? `x_${name}`);
