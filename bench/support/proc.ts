import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * What /proc says about other processes: CPU time, resident memory, open descriptors, the open-file limit. Linux only;
 * every reader answers undefined elsewhere (or for a process that has exited), and the report prints "—".
 */

const CLOCK_TICKS = ((): number => {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU seconds a process has used so far. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** VmRSS of a process, in bytes. */
export function rssBytes(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** How many file descriptors a process holds open. */
export function openFds(pid: number): number | undefined {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return undefined;
  }
}

/** The soft limit on open files of a process (its children inherit it). */
export function openFileLimit(pid: number = process.pid): number | undefined {
  try {
    const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
    if (!match) return undefined;
    return match[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(match[1]);
  } catch {
    return undefined;
  }
}

/** Every process named `postgres` (the embedded cluster's postmaster, backends and workers) visible to us. */
export function postgresPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number)
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
        } catch {
          return false;
        }
      });
  } catch {
    return [];
  }
}

/**
 * The `postgres` processes descended from `root` (an embedded cluster this process started): on a shared machine,
 * other clusters' processes are not this bench's cost.
 */
export function postgresPidsUnder(root: number): number[] {
  const all = postgresPids();
  const parentOf = (pid: number): number | undefined => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      return undefined;
    }
  };
  return all.filter((pid) => {
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = parentOf(at)) if (at === root) return true;
    return false;
  });
}

/**
 * CPU seconds used by a group of processes between `start()` and `seconds()`. Processes are named by a function so
 * the group can change (Postgres backends come and go); a process missing at either end counts from zero there,
 * so short-lived ones are undercounted, never overcounted.
 */
export class GroupCpu {
  readonly #pids: () => readonly number[];
  readonly #start: Map<number, number>;

  private constructor(pids: () => readonly number[]) {
    this.#pids = pids;
    this.#start = GroupCpu.#read(pids());
  }

  static start(pids: () => readonly number[]): GroupCpu {
    return new GroupCpu(pids);
  }

  seconds(): number {
    let total = 0;
    for (const [pid, now] of GroupCpu.#read(this.#pids())) total += now - (this.#start.get(pid) ?? 0);
    return total;
  }

  static #read(pids: readonly number[]): Map<number, number> {
    const out = new Map<number, number>();
    for (const pid of pids) {
      const seconds = cpuSeconds(pid);
      if (seconds !== undefined) out.set(pid, seconds);
    }
    return out;
  }
}
