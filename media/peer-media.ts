import type { types } from 'mediasoup';
import { MediaError } from './media-error.js';
import type { RoomRouter } from './room-router.js';

export type TransportDirection = 'send' | 'recv';

export interface PeerTransport {
  readonly transport: types.WebRtcTransport | types.PlainTransport;
  readonly direction: TransportDirection;
  readonly router: RoomRouter;
  /** connect() was asked for (mediasoup allows it once per transport). */
  connectCalled: boolean;
}

export interface PeerConsumer {
  readonly consumer: types.Consumer;
  /** The producer on the room's main router this consumer copies (the consumer itself may read a pipe of it). */
  readonly sourceProducerId: string;
  /** The recv transport it is on. */
  readonly transportId: string;
}

/**
 * One participant's media in a room: its transports, the producers it sends and the consumers it receives. Closing
 * a transport in mediasoup closes its producers and consumers; the maps follow mediasoup's close events, except
 * transports, which only the room removes (so a worker death still shows whose transports were on it).
 */
export class PeerMedia {
  readonly peerId: string;
  readonly #transports = new Map<string, PeerTransport>();
  readonly #producers = new Map<string, types.Producer>();
  readonly #consumers = new Map<string, PeerConsumer>();
  #closed = false;

  constructor(peerId: string) {
    this.peerId = peerId;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get transports(): ReadonlyMap<string, PeerTransport> {
    return this.#transports;
  }

  get producers(): ReadonlyMap<string, types.Producer> {
    return this.#producers;
  }

  get consumers(): ReadonlyMap<string, PeerConsumer> {
    return this.#consumers;
  }

  addTransport(entry: PeerTransport): void {
    this.#transports.set(entry.transport.id, entry);
  }

  transport(transportId: string, direction?: TransportDirection): PeerTransport {
    const entry = this.#transports.get(transportId);
    if (!entry || entry.transport.closed) {
      throw new MediaError('transport_not_found', `peer ${this.peerId} has no open transport ${transportId}`);
    }
    if (direction && entry.direction !== direction) {
      throw new MediaError('wrong_direction', `transport ${transportId} is a ${entry.direction} transport, not ${direction}`);
    }
    return entry;
  }

  addProducer(producer: types.Producer): void {
    this.#producers.set(producer.id, producer);
    producer.observer.once('close', () => this.#producers.delete(producer.id));
  }

  addConsumer(entry: PeerConsumer): void {
    this.#consumers.set(entry.consumer.id, entry);
    entry.consumer.observer.once('close', () => this.#consumers.delete(entry.consumer.id));
  }

  consumer(consumerId: string): PeerConsumer {
    const entry = this.#consumers.get(consumerId);
    if (!entry) throw new MediaError('consumer_not_found', `peer ${this.peerId} has no consumer ${consumerId}`);
    return entry;
  }

  /**
   * Forgets the transports on `routers` (their worker died, so mediasoup already closed them) and, if it had any, closes
   * the rest; true if it had any.
   */
  dropTransportsOn(routers: ReadonlySet<RoomRouter>): boolean {
    let had = false;
    for (const [id, entry] of this.#transports) {
      if (!routers.has(entry.router)) continue;
      entry.transport.close();
      this.#transports.delete(id);
      had = true;
    }
    // The peer is told to make all of its media again (media.reset): what survived on other routers would only linger,
    // holding producers nobody sends to and places under TRANSPORTS_PER_DIRECTION its new transports need.
    if (had) for (const id of [...this.#transports.keys()]) this.closeTransport(id);
    return had;
  }

  closeTransport(transportId: string): void {
    const entry = this.#transports.get(transportId);
    if (!entry) return;
    this.#transports.delete(transportId);
    entry.transport.close();
  }

  /** Consumers, then producers, then transports. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const { consumer } of [...this.#consumers.values()]) consumer.close();
    for (const producer of [...this.#producers.values()]) producer.close();
    for (const { transport } of this.#transports.values()) transport.close();
    this.#transports.clear();
  }
}
