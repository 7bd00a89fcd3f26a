/**
 * A small Prometheus text-format registry: counters, gauges (set, or read at scrape time) and histograms with fixed
 * buckets. Enough for this server's few dozen series without another dependency on the request path.
 */
type Labels = Readonly<Record<string, string>>;

function labelKey(labels: Labels): string {
  const names = Object.keys(labels).sort();
  return names.map((n) => `${n}="${escapeLabel(labels[n]!)}"`).join(',');
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

interface Metric {
  render(): string;
}

class Counter implements Metric {
  readonly #values = new Map<string, number>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(labels);
    this.#values.set(key, (this.#values.get(key) ?? 0) + by);
  }
  /** An incrementer for one label set, its key built once: for series bumped on every event. */
  bound(labels: Labels): () => void {
    const key = labelKey(labels);
    return () => this.#values.set(key, (this.#values.get(key) ?? 0) + 1);
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [key, value] of this.#values) lines.push(`${this.name}${key ? `{${key}}` : ''} ${value}`);
    return lines.join('\n');
  }
}

class Gauge implements Metric {
  readonly #values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly collect?: () => ReadonlyArray<readonly [Labels, number]>,
  ) {}
  set(labels: Labels, value: number): void {
    this.#values.set(labelKey(labels), value);
  }
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(labels);
    this.#values.set(key, (this.#values.get(key) ?? 0) + by);
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    const values = this.collect
      ? new Map(this.collect().map(([labels, value]) => [labelKey(labels), value]))
      : this.#values;
    for (const [key, value] of values) lines.push(`${this.name}${key ? `{${key}}` : ''} ${value}`);
    return lines.join('\n');
  }
}

class Histogram implements Metric {
  readonly #series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(readonly name: string, readonly help: string, readonly buckets: readonly number[]) {}
  observe(value: number, labels: Labels = {}): void {
    const key = labelKey(labels);
    let series = this.#series.get(key);
    if (!series) this.#series.set(key, (series = { counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) series.counts[i]!++;
    series.sum += value;
    series.count++;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const [key, s] of this.#series) {
      const prefix = key ? `${key},` : '';
      this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{${prefix}le="${b}"} ${s.counts[i]}`));
      lines.push(`${this.name}_bucket{${prefix}le="+Inf"} ${s.count}`);
      lines.push(`${this.name}_sum${key ? `{${key}}` : ''} ${s.sum}`);
      lines.push(`${this.name}_count${key ? `{${key}}` : ''} ${s.count}`);
    }
    return lines.join('\n');
  }
}

export class MetricsRegistry {
  readonly #metrics: Metric[] = [];

  counter(name: string, help: string): Counter {
    return this.#add(new Counter(name, help));
  }
  gauge(name: string, help: string, collect?: () => ReadonlyArray<readonly [Labels, number]>): Gauge {
    return this.#add(new Gauge(name, help, collect));
  }
  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.#add(new Histogram(name, help, buckets));
  }
  render(): string {
    return `${this.#metrics.map((m) => m.render()).join('\n')}\n`;
  }
  #add<T extends Metric>(metric: T): T {
    this.#metrics.push(metric);
    return metric;
  }
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const BATCH_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];

/** The server's metrics, with the observer hooks the host, the gateway and the socket endpoints report to. */
export function createServerMetrics(sources: {
  liveActors: () => ReadonlyMap<string, number>;
  unrestorableActors: () => number;
  httpInFlight: () => number;
}) {
  const registry = new MetricsRegistry();
  const requests = registry.counter('registry_http_requests_total', 'HTTP requests answered, by operation and status.');
  const requestSeconds = registry.histogram('registry_http_request_duration_seconds', 'HTTP request duration.', LATENCY_BUCKETS);
  registry.gauge('registry_http_requests_in_flight', 'Requests of the public listener received and not yet answered or abandoned.', () => [
    [{}, sources.httpInFlight()],
  ]);
  const activations = registry.counter('registry_actor_activations_total', 'Actor activations (loads into memory).');
  const deactivations = registry.counter('registry_actor_deactivations_total', 'Actors leaving memory, by reason.');
  const events = registry.counter('registry_actor_events_total', 'Events delivered to actors.');
  const eventsByKind = new Map<string, () => void>();
  registry.gauge('registry_actors_live', 'Actors in memory, by kind.', () =>
    [...sources.liveActors()].map(([kind, n]) => [{ kind }, n] as const),
  );
  registry.gauge(
    'registry_actors_unrestorable',
    'Actors whose stored state did not restore at their latest load (refused activation until mended; the error log names each).',
    () => [[{}, sources.unrestorableActors()]],
  );
  const batchActors = registry.histogram('registry_commit_batch_actors', 'Actors written per group commit.', BATCH_BUCKETS);
  const batchEvents = registry.histogram('registry_commit_batch_events', 'Journal entries written per group commit.', BATCH_BUCKETS);
  const commitSeconds = registry.histogram('registry_commit_duration_seconds', 'Group commit duration.', LATENCY_BUCKETS);
  const commitFailures = registry.counter('registry_commit_failures_total', 'Group commits that failed.');
  // Failure series exist at 0 from the start: one that first appears at 1 shows no increase() to an alert.
  commitFailures.inc({}, 0);
  const commitFenced = registry.counter(
    'registry_commit_entries_fenced_total',
    'Actor writes a group commit refused by the fence (another activation of the actor stored a newer epoch, or the journal moved on): each stops its activation, counted also as a fenced deactivation.',
  );
  commitFenced.inc({}, 0);
  const socketsOpen = registry.gauge('registry_websockets_open', 'Open WebSocket connections, by endpoint.');
  const socketsClosed = registry.counter('registry_websockets_closed_total', 'Closed WebSocket connections, by endpoint and close code (client_other: a code of the client\'s own, 3000–4999).');
  const sweepRuns = registry.counter(
    'registry_sweep_runs_total',
    'Sweep runs, by sweep and outcome: done (nothing due left; for the actor journal, a cycle over every actor ended), ' +
      'unfinished (rows due left for the next run: they fall due faster than they go), continuing (the actor journal\'s ' +
      'cycle goes on next run), failed.',
  );
  const sweepLastSuccess = registry.gauge(
    'registry_sweep_last_success_timestamp_seconds',
    'Unix time of each scheduled sweep\'s last run that did not fail, 0 before the first: it stops advancing when a sweep hangs, keeps failing or is no longer scheduled.',
  );
  const sweepRemoved = registry.counter('registry_sweep_rows_removed_total', 'Rows the sweeps removed past their retention, by sweep.');
  const workerDeaths = registry.counter(
    'registry_media_worker_deaths_total',
    'mediasoup workers that died, by whether a replacement started (failed: the node runs with one worker fewer).',
  );
  for (const replacement of ['started', 'failed']) workerDeaths.inc({ replacement }, 0);
  registry.gauge('process_resident_memory_bytes', 'Resident memory of this process.', () => [[{}, process.memoryUsage.rss()]]);

  return {
    render: () => registry.render(),
    http: {
      requestCompleted(operation: string, method: string, status: number, durationMs: number): void {
        requests.inc({ operation, method, status: String(status) });
        requestSeconds.observe(durationMs / 1000, { operation });
      },
    },
    host: {
      activated: (kind: string) => activations.inc({ kind }),
      deactivated: (kind: string, reason: string) => deactivations.inc({ kind, reason }),
      eventAccepted(kind: string): void {
        let bump = eventsByKind.get(kind);
        if (!bump) eventsByKind.set(kind, (bump = events.bound({ kind })));
        bump();
      },
      batchCommitted(actors: number, journalEntries: number, durationMs: number): void {
        batchActors.observe(actors);
        batchEvents.observe(journalEntries);
        commitSeconds.observe(durationMs / 1000);
      },
      batchFailed: () => commitFailures.inc(),
      entriesFenced: (entries: number) => commitFenced.inc({}, entries),
    },
    sweeps: {
      scheduled(sweep: string): void {
        sweepRuns.inc({ sweep, outcome: 'failed' }, 0);
        // inc by 0, not set: a sweep scheduled again under its name keeps the success it already had.
        sweepLastSuccess.inc({ sweep }, 0);
      },
      runEnded(sweep: string, outcome: 'done' | 'unfinished' | 'continuing' | 'failed', removed: number): void {
        sweepRuns.inc({ sweep, outcome });
        // Wall time, not the server's clock: alerts compare it with Prometheus's time().
        if (outcome !== 'failed') sweepLastSuccess.set({ sweep }, Date.now() / 1000);
        if (removed > 0) sweepRemoved.inc({ sweep }, removed);
      },
    },
    media: {
      workerLost: (replaced: boolean) => workerDeaths.inc({ replacement: replaced ? 'started' : 'failed' }),
    },
    sockets: {
      // The HTTP answers of a WebSocket path (upgrades and refusals) are requests too, one operation per endpoint.
      answered(endpoint: string, method: string, status: number, durationMs: number): void {
        requests.inc({ operation: `websocket:${endpoint}`, method, status: String(status) });
        requestSeconds.observe(durationMs / 1000, { operation: `websocket:${endpoint}` });
      },
      opened: (endpoint: string) => socketsOpen.inc({ endpoint }, 1),
      closed(endpoint: string, code: number, byServer: boolean): void {
        socketsOpen.inc({ endpoint }, -1);
        // A client may close with any of 4,000 codes: counted apart only when the server chose the code or it is one of
        // the protocol's own (1000–1015), so a client cannot mint a series per code.
        socketsClosed.inc({ endpoint, code: byServer || code <= 1015 ? String(code) : 'client_other' });
      },
    },
  };
}

export type ServerMetrics = ReturnType<typeof createServerMetrics>;
