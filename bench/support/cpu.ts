import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** CPU used by every process on the machine between two points, from /proc/stat; undefined off Linux. */
export class MachineCpu {
  readonly #start: { busy: number; total: number } | undefined;

  private constructor(start: { busy: number; total: number } | undefined) {
    this.#start = start;
  }

  static start(): MachineCpu {
    return new MachineCpu(ticks());
  }

  /** Share of all cores busy since `start()` (0..1). */
  share(): number | undefined {
    const end = ticks();
    if (!this.#start || !end) return undefined;
    return (end.busy - this.#start.busy) / Math.max(1, end.total - this.#start.total);
  }

  /** CPU µs (all processes, all cores) spent per unit of work done at `perSecond` while `share` of the machine was busy. */
  static microsPer(share: number | undefined, perSecond: number): number | undefined {
    return share === undefined || perSecond <= 0 ? undefined : (share * availableParallelism() * 1e6) / perSecond;
  }
}

/** Share of the whole machine busy over the next `ms`. */
export async function sampleMachineCpu(ms: number): Promise<number | undefined> {
  const cpu = MachineCpu.start();
  await new Promise((resolve) => setTimeout(resolve, ms));
  return cpu.share();
}

function ticks(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}
