import type { types } from 'mediasoup';

/** What one worker carries, as the pool counts it. */
export interface WorkerLoad {
  readonly pid: number;
  readonly routers: number;
  readonly transports: number;
  readonly producers: number;
  readonly consumers: number;
  /** `consumers + producers + transports`: the figure `leastLoaded()` compares. */
  readonly load: number;
  /** Rooms with at least one router on this worker. */
  readonly rooms: readonly string[];
}

/**
 * One mediasoup worker of the pool and the count of what lives on it. The count comes from mediasoup's own observer
 * events (every router, transport, producer and consumer created on the worker, pipe ones included, and their
 * closes), so nothing a room forgets to report can skew it. Consumers dominate a worker's per-packet work (each one
 * is a copy of every packet of its producer, sent out), producers and transports add a little each: the load is
 * their plain sum, which for an audio room is within a few percent of the consumer count.
 */
export class PooledWorker {
  readonly worker: types.Worker;
  readonly pid: number;
  #routers = 0;
  #transports = 0;
  #producers = 0;
  #consumers = 0;
  /** roomId → ids of that room's routers here; kept when the worker dies, so the pool can say which rooms lost. */
  readonly #rooms = new Map<string, Set<string>>();

  constructor(worker: types.Worker) {
    this.worker = worker;
    this.pid = worker.pid;
    worker.observer.on('newrouter', (router) => this.#countRouter(router));
  }

  get load(): number {
    return this.#consumers + this.#producers + this.#transports;
  }

  get routerCount(): number {
    return this.#routers;
  }

  /** Rooms that have a router here (or had, when the worker died). */
  get rooms(): readonly string[] {
    return [...this.#rooms.keys()];
  }

  snapshot(): WorkerLoad {
    return {
      pid: this.pid,
      routers: this.#routers,
      transports: this.#transports,
      producers: this.#producers,
      consumers: this.#consumers,
      load: this.load,
      rooms: this.rooms,
    };
  }

  async createRouter(roomId: string, options: types.RouterOptions): Promise<types.Router> {
    const router = await this.worker.createRouter(options);
    let ids = this.#rooms.get(roomId);
    if (!ids) this.#rooms.set(roomId, (ids = new Set()));
    ids.add(router.id);
    router.observer.once('close', () => {
      // A dying worker closes its routers before it emits 'died': keep the record for the lost-rooms report.
      if (this.worker.closed) return;
      ids.delete(router.id);
      if (ids.size === 0 && this.#rooms.get(roomId) === ids) this.#rooms.delete(roomId);
    });
    return router;
  }

  #countRouter(router: types.Router): void {
    this.#routers += 1;
    router.observer.once('close', () => (this.#routers -= 1));
    router.observer.on('newtransport', (transport) => {
      this.#transports += 1;
      transport.observer.once('close', () => (this.#transports -= 1));
      transport.observer.on('newproducer', (producer) => {
        this.#producers += 1;
        producer.observer.once('close', () => (this.#producers -= 1));
      });
      transport.observer.on('newconsumer', (consumer) => {
        this.#consumers += 1;
        consumer.observer.once('close', () => (this.#consumers -= 1));
      });
    });
  }
}
