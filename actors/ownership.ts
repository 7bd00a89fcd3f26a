/**
 * Who may write an actor. Each activation claims an epoch; the store refuses writes whose epoch is older than the
 * stored one, so a node that lost ownership without knowing it cannot overwrite the new owner.
 *
 * Single-node mode uses `InProcessOwnership`; cluster mode will fill the same interface from Redis.
 */
export interface Ownership {
  /** An epoch greater than `atLeast` and than every epoch granted before for this actor. */
  claim(kind: string, key: string, atLeast: number): Promise<number>;
  /** The activation holding `epoch` has ended; `written` says whether the store now holds that epoch. */
  release(kind: string, key: string, epoch: number, written: boolean): void;
}

export class InProcessOwnership implements Ownership {
  // Only epochs not yet visible in the store are remembered: once written, the stored epoch carries the floor.
  readonly #granted = new Map<string, number>();

  async claim(kind: string, key: string, atLeast: number): Promise<number> {
    const id = `${kind}\u0000${key}`;
    const epoch = Math.max(atLeast, this.#granted.get(id) ?? 0) + 1;
    this.#granted.set(id, epoch);
    return epoch;
  }

  release(kind: string, key: string, epoch: number, written: boolean): void {
    const id = `${kind}\u0000${key}`;
    if (written && this.#granted.get(id) === epoch) this.#granted.delete(id);
  }
}
