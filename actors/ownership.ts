/**
 * Who may write an actor. Each activation claims an epoch; the store refuses writes whose epoch is older than the
 * stored one, so a node that lost ownership without knowing it cannot overwrite the new owner.
 *
 * Single-node mode uses `InProcessOwnership`; cluster mode will fill the same interface from Redis.
 */
export interface Ownership {
  /** An epoch greater than `atLeast` and than every epoch granted before for this actor that may still reach the store. */
  claim(kind: string, key: string, atLeast: number): Promise<number>;
  /** The activation holding `epoch` has ended (or never started: it failed to restore, or was stopped while loading). */
  release(kind: string, key: string, epoch: number, outcome: ReleaseOutcome): void;
}

/**
 * What became of an epoch. `stored`: the store holds it, which fences out every older epoch, so the store alone now
 * says what the next epoch must exceed. `unused`: nothing was sent under it, so it will never reach the store (older
 * epochs that may are still remembered). `unsettled`: a write sent under it may yet land (a commit whose answer was
 * lost), so it is remembered.
 */
export type ReleaseOutcome = 'stored' | 'unused' | 'unsettled';

export class InProcessOwnership implements Ownership {
  /**
   * Per actor, the epochs that may still reach the store, oldest first: claimed and not ended, or ended unsettled.
   * Usually one. An actor with none has no entry: the stored epoch carries the floor.
   */
  readonly #open = new Map<string, number[]>();

  async claim(kind: string, key: string, atLeast: number): Promise<number> {
    const id = `${kind}\u0000${key}`;
    const open = this.#open.get(id);
    const epoch = Math.max(atLeast, open?.at(-1) ?? 0) + 1;
    if (open) open.push(epoch);
    else this.#open.set(id, [epoch]);
    return epoch;
  }

  release(kind: string, key: string, epoch: number, outcome: ReleaseOutcome): void {
    if (outcome === 'unsettled') return;
    const id = `${kind}\u0000${key}`;
    const open = this.#open.get(id);
    if (!open) return;
    // An unused epoch goes alone: forgetting it must not forget an older one whose write may still land.
    const kept = outcome === 'stored' ? open.filter((e) => e > epoch) : open.filter((e) => e !== epoch);
    if (kept.length === 0) this.#open.delete(id);
    else this.#open.set(id, kept);
  }
}
