import { ManualClock, type Clock, type TimerHandle } from '../../actors/clock.js';

/**
 * A clock whose time can move (`lag`) without delivering the timers that fall due: it holds open the window between a
 * deadline and the delivery of its timer (a passivated actor's timer waits for a poll; an outage delays it longer).
 * `inner` moves time and delivers timers as a ManualClock does.
 */
export class LaggingClock implements Clock {
  readonly inner: ManualClock;
  lag = 0;

  constructor(start = Date.now()) {
    this.inner = new ManualClock(start);
  }

  now(): number {
    return this.inner.now() + this.lag;
  }
  setTimeout(fn: () => void, ms: number): TimerHandle {
    return this.inner.setTimeout(fn, ms);
  }
  clearTimeout(handle: TimerHandle): void {
    this.inner.clearTimeout(handle);
  }
}
