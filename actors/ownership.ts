/**
 * Who may write an actor. Each activation claims an epoch; the store refuses writes whose epoch is older than the
 * stored one, so a node that lost ownership without knowing it cannot overwrite the new owner.
 *
 * Single-node mode uses `InProcessOwnership`; cluster mode will fill the same interface from Redis.
 */
export interface Ownership {
  /** An epoch greater than `atLeast` and than every epoch granted before for this actor. */
  claim(kind: string, key: string, atLeast: number): Promise<number>;
  /**
   * The activation holding `epoch` has ended; `settled`: the store holds that epoch, or never will (nothing was sent
   * under it), so the store alone now says what the next epoch must exceed.
   */
  release(kind: string, key: string, epoch: number, settled: boolean): void;
}

export class InProcessOwnership implements Ownership {
  // Only epochs that may still reach the store are remembered: otherwise the stored epoch carries the floor.
  readonly #granted = new Map<string, number>();

  async claim(kind: string, key: string, atLeast: number): Promise<number> {
    const id = `${kind}\u0000${key}`;
    const epoch = Math.max(atLeast, this.#granted.get(id) ?? 0) + 1;
    this.#granted.set(id, epoch);
    return epoch;
  }

  release(kind: string, key: string, epoch: number, settled: boolean): void {
    const id = `${kind}\u0000${key}`;
    if (settled && this.#granted.get(id) === epoch) this.#granted.delete(id);
  }
}
