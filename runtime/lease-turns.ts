/**
 * One turn at a time per person (account id), in arrival order: an activation that moves the person's lease and a
 * write the lease fences outside the actors (Plugin settings) never overlap. Such a write enters the turn once it holds
 * everything it could wait for (its connection and locks), checks the lease there and leaves after its commit, so the
 * page that takes the lease next reads after it, a page superseded before its turn is refused, and an activation waits
 * only for a write's last statements. In-process: one node serves a person's Runtime calls (cluster mode must route
 * them to the node owning the person's lease actor, or share the turn).
 */
export class LeaseTurns {
  readonly #tails = new Map<string, Promise<void>>();

  /** Waits for the person's turn; the returned function ends it (once; later calls do nothing). */
  async enter(accountId: string): Promise<() => void> {
    const before = this.#tails.get(accountId) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => mine);
    this.#tails.set(accountId, tail);
    await before;
    return () => {
      done();
      if (this.#tails.get(accountId) === tail) this.#tails.delete(accountId);
    };
  }

  async run<T>(accountId: string, step: () => Promise<T>): Promise<T> {
    const leave = await this.enter(accountId);
    try {
      return await step();
    } finally {
      leave();
    }
  }
}
