/** Reply latencies of one run, in ms. Kept raw (a few hundred thousand doubles at most) and sorted once. */
export class LatencyRecorder {
  #samples = new Float64Array(1 << 16);
  #count = 0;

  record(ms: number): void {
    if (this.#count === this.#samples.length) {
      const grown = new Float64Array(this.#samples.length * 2);
      grown.set(this.#samples);
      this.#samples = grown;
    }
    this.#samples[this.#count++] = ms;
  }

  get count(): number {
    return this.#count;
  }

  summary(): LatencySummary {
    const sorted = this.#samples.slice(0, this.#count).sort();
    const at = (q: number): number => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!);
    return { p50: at(0.5), p99: at(0.99), max: at(1) };
  }
}

export interface LatencySummary {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}
