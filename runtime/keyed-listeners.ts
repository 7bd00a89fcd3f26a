/**
 * Listeners by key (a session, an account, a grant), in process: what this node's sockets subscribe to so that a
 * change committed here reaches them at once. A key leaves the map with its last listener.
 */
export class KeyedListeners<L extends (...args: never[]) => void> {
  readonly #byKey = new Map<string, Set<L>>();

  /** Returns the unsubscribe. */
  add(key: string, listener: L): () => void {
    let set = this.#byKey.get(key);
    if (!set) this.#byKey.set(key, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#byKey.get(key) === set) this.#byKey.delete(key);
    };
  }

  /** Calls every listener of `key`; a listener may unsubscribe (close its socket) while being told. */
  notify(key: string, ...args: Parameters<L>): void {
    const set = this.#byKey.get(key);
    if (!set) return;
    for (const listener of [...set]) listener(...args);
  }
}
