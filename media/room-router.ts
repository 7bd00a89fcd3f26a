import type { types } from 'mediasoup';

/**
 * One router of a room, on one worker, and what the room placed on it: the recv transports whose consumers it
 * carries, and the producers piped in from the room's main router (one pipe per producer, made on first need).
 */
export class RoomRouter {
  readonly router: types.Router;
  readonly pid: number;
  /** recv transport → consumers on it. */
  readonly #recvTransports = new Map<types.Transport, number>();
  /** source producer id (on the main router) → its pipe producer here. */
  readonly #pipes = new Map<string, Promise<types.Producer>>();
  #consumers = 0;

  constructor(router: types.Router, pid: number) {
    this.router = router;
    this.pid = pid;
    // Counted from mediasoup's observers: pipe consumers feeding other routers are real copies of every packet too.
    router.observer.on('newtransport', (transport) =>
      transport.observer.on('newconsumer', (consumer) => {
        this.#consumers += 1;
        consumer.observer.once('close', () => (this.#consumers -= 1));
      }),
    );
  }

  get closed(): boolean {
    return this.router.closed;
  }

  get consumers(): number {
    return this.#consumers;
  }

  /**
   * Consumers this router is committed to: each recv transport counts for at least `perRecvTransport` (what a
   * listener will consume once it subscribes to everyone), and pipe consumers as they are.
   */
  reserved(perRecvTransport: number): number {
    let onRecv = 0;
    let reserved = 0;
    for (const n of this.#recvTransports.values()) {
      onRecv += n;
      reserved += Math.max(n, perRecvTransport);
    }
    return reserved + (this.#consumers - onRecv);
  }

  hasRoomFor(perRecvTransport: number, budget: number): boolean {
    return !this.closed && this.reserved(perRecvTransport) + Math.max(1, perRecvTransport) <= budget;
  }

  /** Open recv transports placed here. */
  get recvTransports(): number {
    return this.#recvTransports.size;
  }

  /** Call right after creating a recv transport on this router, before it consumes. */
  addRecvTransport(transport: types.Transport): void {
    this.#recvTransports.set(transport, 0);
    const add = (delta: number): void => {
      const n = this.#recvTransports.get(transport);
      if (n !== undefined) this.#recvTransports.set(transport, n + delta);
    };
    transport.observer.on('newconsumer', (consumer) => {
      add(1);
      consumer.observer.once('close', () => add(-1));
    });
    transport.observer.once('close', () => this.#recvTransports.delete(transport));
  }

  /** The id, on this router, of `sourceId` from `main`: itself here, else its pipe producer (piped on first need). */
  async producerId(main: RoomRouter, sourceId: string): Promise<string> {
    if (main === this) return sourceId;
    let pipe = this.#pipes.get(sourceId);
    if (!pipe) {
      // keepId: false, because routers of one room may share a worker, where ids are unique worker-wide.
      pipe = main.router
        .pipeToRouter({ producerId: sourceId, router: this.router, keepId: false, enableSctp: false })
        .then(({ pipeProducer }) => {
          if (!pipeProducer) throw new Error('pipeToRouter gave no pipe producer');
          pipeProducer.observer.once('close', () => {
            if (this.#pipes.get(sourceId) === pipe) this.#pipes.delete(sourceId);
          });
          return pipeProducer;
        });
      this.#pipes.set(sourceId, pipe);
      pipe.catch(() => {
        if (this.#pipes.get(sourceId) === pipe) this.#pipes.delete(sourceId);
      });
    }
    return (await pipe).id;
  }

  get pipedProducers(): number {
    return this.#pipes.size;
  }

  close(): void {
    this.router.close();
  }
}
