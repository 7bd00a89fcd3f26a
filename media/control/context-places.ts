/**
 * The places of maxParticipantsPerContext: per room, the members holding one. A place is taken in the same synchronous
 * step as the check that one is free, at the upgrade, before the socket opens; counting only open sockets let upgrades
 * whose checks ran before any of them opened all pass. It is given back once, when the connection closes or its
 * upgrade is abandoned.
 *
 * A member counts once however many of their connections hold the place: a reconnect takes it again before the
 * connection it replaces has closed, and a full room must not lock its own members out.
 */
export class ContextPlaces {
  readonly #limit: number;
  /** Per room, per member: how many connections (open, or still upgrading) hold the member's place. */
  readonly #rooms = new Map<string, Map<string, number>>();

  constructor(limit: number) {
    this.#limit = limit;
  }

  /**
   * A place in `room` for `member`, or undefined when other members hold every place. Returns its release, which gives
   * it back on the first call only: a connection's close and its abandonment cannot both count.
   */
  take(room: string, member: string): (() => void) | undefined {
    let members = this.#rooms.get(room);
    const held = members?.get(member) ?? 0;
    if (held === 0 && (members?.size ?? 0) >= this.#limit) return undefined;
    if (!members) this.#rooms.set(room, (members = new Map()));
    members.set(member, held + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#give(room, member);
    };
  }

  #give(room: string, member: string): void {
    const members = this.#rooms.get(room);
    const held = members?.get(member);
    if (!members || held === undefined) return;
    if (held > 1) {
      members.set(member, held - 1);
      return;
    }
    members.delete(member);
    if (members.size === 0) this.#rooms.delete(room);
  }
}
