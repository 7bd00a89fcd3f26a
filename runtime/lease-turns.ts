/**
 * One turn at a time per person (account id), in arrival order: an activation that moves the person's lease and a
 * write the lease fences outside the actors (Plugin settings) never overlap. Such a write checks the lease in its turn
 * and commits before the turn ends, so the page that takes the lease next reads after it, and a page superseded
 * before its write's turn is refused. In-process: one node serves a person's Runtime calls (cluster mode must route
 * them to the node owning the person's lease actor, or share the turn).
 */
export class LeaseTurns {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(accountId: string, step: () => Promise<T>): Promise<T> {
    const before = this.#tails.get(accountId) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => mine);
    this.#tails.set(accountId, tail);
    try {
      await before;
      return await step();
    } finally {
      done();
      if (this.#tails.get(accountId) === tail) this.#tails.delete(accountId);
    }
  }
}
