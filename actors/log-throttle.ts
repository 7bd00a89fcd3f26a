type Level = 'info' | 'warn' | 'error';

/** What the throttle writes to: a pino logger, or any logger with these levels (the actor host's). */
export type LevelLogger = Readonly<Record<Level, (details: Record<string, unknown>, message: string) => void>>;

/**
 * Keeps a repeated failure from flooding the log: the first line of a key is written whole (with its request id and
 * cause), the same key's further lines within `windowMs` are only counted, and when the window ends one line (on the
 * throttle's own logger, not the first request's) says how many there were. A dead database failing every request,
 * socket and renewal round prints a few lines a minute, not one per failure. Keys must be few (a message and a code,
 * not a request's own values): a window is forgotten when it ends, so only the keys of the last `windowMs` are held.
 */
export class LogThrottle {
  readonly #logger: LevelLogger;
  readonly #windowMs: number;
  /** Lines not written, per key whose window is open. */
  readonly #suppressed = new Map<string, number>();

  constructor(logger: LevelLogger, windowMs = 10_000) {
    this.#logger = logger;
    this.#windowMs = windowMs;
  }

  /** `log` on the throttle's own logger. */
  say(level: Level, key: string, details: Record<string, unknown>, msg: string): void {
    this.log(this.#logger, level, key, details, msg);
  }

  /** Writes `msg` on `logger` unless `key` was written within the window; then it is counted for the window's summary. */
  log(logger: LevelLogger, level: Level, key: string, details: Record<string, unknown>, msg: string): void {
    const suppressed = this.#suppressed.get(key);
    if (suppressed !== undefined) {
      this.#suppressed.set(key, suppressed + 1);
      return;
    }
    this.#suppressed.set(key, 0);
    logger[level](details, msg);
    const timer = setTimeout(() => {
      const count = this.#suppressed.get(key) ?? 0;
      this.#suppressed.delete(key);
      if (count > 0) this.#logger[level]({ suppressed: count, windowMs: this.#windowMs }, `${msg} (${count} more like it within ${this.#windowMs / 1000} s, not logged one by one)`);
    }, this.#windowMs);
    timer.unref();
  }
}
