import { test } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import * as z from 'zod';
import { MetricsRegistry } from '../../server/metrics.js';
import { defineWebSocketEndpoint } from '../../transport/ws/endpoint.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

/**
 * /metrics as a Prometheus scraper reads it (text format 0.0.4): each family's HELP and TYPE once, before its samples;
 * label values escaped; a histogram's buckets cumulative up to +Inf, which equals its _count, with _sum beside.
 */
const echo = defineWebSocketEndpoint({
  path: '/v1/test/exposition-socket',
  name: 'test-exposition',
  maxMessageBytes: 1024,
  maxBackpressureBytes: 64 * 1024,
  idleTimeoutSeconds: 16,
  inbound: z.strictObject({ type: z.literal('say') }),
  authenticate: async () => ({ subject: 'anyone' }),
});

let server: TestServer;
withTestServer(test, (started) => ({ server } = started), { sockets: (_services, mount) => mount(echo) });

interface Sample {
  readonly name: string;
  readonly labels: ReadonlyMap<string, string>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

/** The label set of a sample line from `{`, unescaping values as the format says; throws on anything malformed. */
function parseLabels(text: string): { labels: Map<string, string>; rest: string } {
  const labels = new Map<string, string>();
  let i = 1;
  while (text[i] !== '}') {
    const name = NAME.exec(text.slice(i))?.[0];
    if (!name || text[i + name.length] !== '=' || text[i + name.length + 1] !== '"') throw new Error(`bad label at ${text.slice(i)}`);
    i += name.length + 2;
    let value = '';
    for (;;) {
      const c = text[i++];
      if (c === undefined || c === '\n') throw new Error(`unterminated label value in ${text}`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i++];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`bad escape \\${next} in ${text}`);
      } else value += c;
    }
    if (labels.has(name)) throw new Error(`label ${name} twice in ${text}`);
    labels.set(name, value);
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`bad label separator in ${text}`);
  }
  return { labels, rest: text.slice(i + 1) };
}

function parseExposition(text: string): { families: Map<string, { type: string; samples: Sample[] }> } {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a line feed');
  const families = new Map<string, { type: string; samples: Sample[] }>();
  const helped = new Set<string>();
  const seen = new Set<string>();
  let current: string | undefined;
  for (const line of text.slice(0, -1).split('\n')) {
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (kind === 'HELP') {
        assert.not.ok(helped.has(name), `HELP of ${name} twice`);
        assert.not.ok(/\\(?![\\n])/.test(rest), `HELP of ${name} has an unescaped backslash`);
        helped.add(name);
      } else {
        assert.not.ok(families.has(name), `TYPE of ${name} twice`);
        assert.ok(['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest), `TYPE of ${name}: ${rest}`);
        families.set(name, { type: rest, samples: [] });
      }
      current = name;
      continue;
    }
    assert.not.ok(line.startsWith('#') || line === '', `unexpected line ${JSON.stringify(line)}`);
    const name = NAME.exec(line)?.[0];
    if (!name) throw new Error(`bad sample line ${line}`);
    const after = line.slice(name.length);
    const { labels, rest } = after.startsWith('{') ? parseLabels(after) : { labels: new Map<string, string>(), rest: after };
    const value = /^ (\S+)$/.exec(rest)?.[1];
    assert.ok(value !== undefined && (/^[-+]?(\d+\.?\d*(e[-+]?\d+)?|\.\d+|Inf|NaN)$/i.test(value)), `bad value in ${line}`);
    const family = current === undefined ? undefined : families.get(current);
    assert.ok(family && current, `sample ${line} outside any family`);
    const suffixes = family.type === 'histogram' ? ['_bucket', '_sum', '_count'] : family.type === 'counter' ? ['', '_total'] : [''];
    assert.ok(suffixes.some((s) => `${current}${s}` === name) || (family.type === 'counter' && name === current), `sample ${name} in family ${current}`);
    const key = `${name}{${[...labels].sort().map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`;
    assert.not.ok(seen.has(key), `series ${key} twice`);
    seen.add(key);
    family.samples.push({ name, labels, value: Number(value) });
  }
  for (const name of families.keys()) assert.ok(helped.has(name), `${name} has TYPE but no HELP`);
  return { families };
}

const bound = (le: string): number => (le === '+Inf' ? Infinity : Number(le));

function checkHistograms(families: Map<string, { type: string; samples: Sample[] }>): number {
  let checked = 0;
  for (const [name, family] of families) {
    if (family.type !== 'histogram') continue;
    const series = new Map<string, Sample[]>();
    for (const s of family.samples) {
      const key = [...s.labels].filter(([k]) => k !== 'le').sort().map(([k, v]) => `${k}=${v}`).join(',');
      series.set(key, [...(series.get(key) ?? []), s]);
    }
    for (const [key, samples] of series) {
      const buckets = samples.filter((s) => s.name === `${name}_bucket`);
      const bounds = buckets.map((b) => b.labels.get('le')!);
      assert.is(bounds.at(-1), '+Inf', `${name}{${key}} ends with +Inf`);
      for (let i = 1; i < buckets.length; i++) {
        assert.ok(bound(bounds[i]!) > bound(bounds[i - 1]!), `${name}{${key}} bounds ascend`);
        assert.ok(buckets[i]!.value >= buckets[i - 1]!.value, `${name}{${key}} buckets are cumulative`);
      }
      const count = samples.find((s) => s.name === `${name}_count`);
      const sum = samples.find((s) => s.name === `${name}_sum`);
      assert.ok(count && sum, `${name}{${key}} has _count and _sum`);
      assert.is(buckets.at(-1)!.value, count.value, `${name}{${key}}: +Inf equals _count`);
      checked++;
    }
  }
  return checked;
}

test('failure counters an alert watches are 0 from the start, so the first failure is an increase, not a new series at 1', async () => {
  // Prometheus's increase() and rate() need a sample before the step: a series that first appears at 1 and stays
  // there shows no increase, so one commit failure, or a sweep's first failure, would never fire an alert.
  const text = await (await fetch(`${server.opsUrl}/metrics`)).text();
  assert.match(text, /^registry_commit_failures_total 0$/m);
  assert.match(text, /^registry_commit_entries_fenced_total 0$/m);
  assert.match(text, /^registry_sweep_runs_total\{outcome="failed",sweep="idempotency records"\} 0$/m);
});

test('the exposition after traffic (requests, actors, commits, sockets) is well-formed', async () => {
  for (let i = 0; i < 3; i++) await (await fetch(`${server.url}/v1/status`)).text();
  await (await fetch(`${server.url}/nowhere`)).text();
  await (await fetch(`${server.url}/v1/test/exposition-socket`)).text();
  const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/test/exposition-socket`);
  await new Promise<void>((resolve, reject) => (ws.once('open', () => resolve()), ws.once('error', reject)));
  ws.close(4123);
  const text = await waitFor(async () => {
    const body = await (await fetch(`${server.opsUrl}/metrics`)).text();
    return body.includes('code="client_other"') ? body : undefined;
  }, 'the close to be counted');
  const { families } = parseExposition(text);
  assert.ok(families.size >= 10, `${families.size} families`);
  assert.ok(checkHistograms(families) >= 2, 'some histogram series were checked');
});

test('label values with a quote, a backslash and a line feed are escaped and read back as they were', () => {
  const registry = new MetricsRegistry();
  const value = 'a "quoted" C:\\path\nand a second line';
  registry.counter('test_escapes_total', 'Escapes.').inc({ what: value });
  registry.histogram('test_escape_seconds', 'Escapes timed.', [0.5, 1]).observe(0.7, { what: value });
  const { families } = parseExposition(registry.render());
  assert.is(families.get('test_escapes_total')?.samples[0]?.labels.get('what'), value);
  assert.is(checkHistograms(families), 1);
  assert.ok(families.get('test_escape_seconds')!.samples.every((s) => s.labels.get('what') === value));
});

test.run();
