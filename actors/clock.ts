/**
 * Time as the host sees it. Everything that schedules or stamps time takes a Clock, so tests drive time by hand
 * instead of waiting real minutes.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export interface TimerHandle {
  readonly id: number;
}

const MAX_NODE_DELAY_MS = 2 ** 31 - 1;

class SystemClock implements Clock {
  #nextId = 1;
  readonly #timers = new Map<number, NodeJS.Timeout>();

  now(): number {
    return Date.now();
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#nextId++;
    this.#arm(id, Date.now() + Math.max(0, ms), fn);
    return { id };
  }

  #arm(id: number, due: number, fn: () => void): void {
    // Node fires delays above 2^31-1 ms at once, so long deadlines are reached in hops.
    const delay = Math.min(due - Date.now(), MAX_NODE_DELAY_MS);
    // Timers never keep the process alive: shutdown is decided by the server, not by a pending deadline.
    const timeout = setTimeout(() => {
      if (Date.now() < due) return this.#arm(id, due, fn);
      this.#timers.delete(id);
      fn();
    }, Math.max(0, delay)).unref();
    this.#timers.set(id, timeout);
  }

  clearTimeout(handle: TimerHandle): void {
    const timeout = this.#timers.get(handle.id);
    if (timeout) clearTimeout(timeout);
    this.#timers.delete(handle.id);
  }
}

export const systemClock: Clock = new SystemClock();

/** A clock that only moves when told to: `advance` runs every timer that falls due, in due order. */
export class ManualClock implements Clock {
  #now: number;
  #nextId = 1;
  readonly #timers = new Map<number, { due: number; fn: () => void }>();

  constructor(start = Date.parse('2026-01-01T00:00:00Z')) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#nextId++;
    this.#timers.set(id, { due: this.#now + Math.max(0, ms), fn });
    return { id };
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers.delete(handle.id);
  }

  /** Moves time forward, firing due timers one by one (a timer set by a firing timer fires too if it is due). */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      let next: [number, { due: number; fn: () => void }] | undefined;
      for (const entry of this.#timers) {
        if (entry[1].due <= target && (!next || entry[1].due < next[1].due)) next = entry;
      }
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = Math.max(this.#now, next[1].due);
      next[1].fn();
    }
    this.#now = target;
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }
}
