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
  /** Per key: the end of its last turn, and how many turns (the one under way and those waiting) it holds. */
  readonly #keys = new Map<string, { tail: Promise<void>; holders: number }>();

  /** Turns of `key` entered and not ended yet: the one under way and those waiting for it. */
  holders(key: string): number {
    return this.#keys.get(key)?.holders ?? 0;
  }

  /** Waits for the key's turn; the returned function ends it (once; later calls do nothing). */
  async enter(key: string): Promise<() => void> {
    const entry = this.#keys.get(key) ?? { tail: Promise.resolve(), holders: 0 };
    const before = entry.tail;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    entry.tail = before.then(() => mine);
    entry.holders += 1;
    this.#keys.set(key, entry);
    await before;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      done();
      entry.holders -= 1;
      if (entry.holders === 0 && this.#keys.get(key) === entry) this.#keys.delete(key);
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
