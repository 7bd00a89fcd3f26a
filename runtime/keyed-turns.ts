/**
 * One turn at a time per key, in arrival order, in this process. Two uses:
 * - The person's lease turn (key: account id; RuntimeSessions): an activation that moves the person's lease and a
 *   write the lease fences outside the actors (Plugin settings) never overlap. Such a write enters the turn once it
 *   holds everything it could wait for (its connection and locks), checks the lease there and leaves after its commit,
 *   so the page that takes the lease next reads after it, a page superseded before its turn is refused, and an
 *   activation waits only for a write's last statements. Cluster mode must route a person's Runtime calls to the node
 *   owning their lease actor, or share the turn.
 * - A person's settings writers of one Plugin (PluginSettings), before they take a connection: they would only queue
 *   on the person's advisory lock, each holding a connection of the shared pool meanwhile.
 */
export class KeyedTurns {
  readonly #tails = new Map<string, Promise<void>>();

  /** Waits for the key's turn; the returned function ends it (once; later calls do nothing). */
  async enter(key: string): Promise<() => void> {
    const before = this.#tails.get(key) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => mine);
    this.#tails.set(key, tail);
    await before;
    return () => {
      done();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    };
  }

  async run<T>(key: string, step: () => Promise<T>): Promise<T> {
    const leave = await this.enter(key);
    try {
      return await step();
    } finally {
      leave();
    }
  }
}
