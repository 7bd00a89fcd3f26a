import { EventEmitter } from 'node:events';
import type { types } from 'mediasoup';
import type { Logger } from 'pino';
import { TRANSPORTS_PER_DIRECTION } from './control/media-control.messages.js';
import { clientRtpCapabilities, producerRtpParameters, ROOM_MEDIA_CODECS, type EncryptionMode } from './media-codecs.js';
import { MediaError } from './media-error.js';
import { PeerMedia, type PeerTransport, type TransportDirection } from './peer-media.js';
import { RoomRouter } from './room-router.js';
import { isWorkerLoss, type MediaWorkerPool, type WorkerLost } from './worker-pool.js';

/** mediasoup's documented capacity of one worker (one CPU core): about 500 consumers. */
export const DEFAULT_CONSUMER_BUDGET = 500;

export interface RoomMediaOptions {
  readonly pool: MediaWorkerPool;
  readonly roomId: string;
  readonly encryption: EncryptionMode;
  /** Where transports listen; 127.0.0.1 by default. */
  readonly listenIp?: string;
  /** The address clients are told to reach (a public address in front of `listenIp`). */
  readonly announcedAddress?: string;
  /** Consumers one router takes before new recv transports go to another router (see `createTransport`). */
  readonly consumerBudget?: number;
  /**
   * Consumers a new recv transport is expected to hold (a stage: its speaker seats), counted against the budget
   * while the listener has not subscribed yet; at least the number of producers in the room.
   */
  readonly expectedConsumersPerRecvTransport?: number;
  /** AudioLevelObserver report period in `transport` rooms. */
  readonly audioLevelIntervalMs?: number;
  readonly logger?: Logger;
}

export type MediaSource = 'microphone' | 'screen';

export interface WebRtcTransportParams {
  readonly id: string;
  readonly iceParameters: types.IceParameters;
  readonly iceCandidates: readonly types.IceCandidate[];
  readonly dtlsParameters: types.DtlsParameters;
  /** No data channels: the control plane carries everything else. */
  readonly sctpParameters: undefined;
}

/** A plain RTP transport (gateways, tests, benchmarks): where to send RTP to, or where it sends from. */
export interface PlainTransportParams {
  readonly id: string;
  readonly ip: string;
  readonly port: number;
}

export interface ProduceRequest {
  readonly kind: types.MediaKind;
  readonly rtpParameters: types.RtpParameters;
  readonly appData: { readonly source: MediaSource };
}

export interface ConsumerParams {
  readonly id: string;
  /** The producer as the room knows it (its id on the main router), whatever router the consumer reads from. */
  readonly producerId: string;
  readonly kind: types.MediaKind;
  readonly rtpParameters: types.RtpParameters;
  readonly type: types.ConsumerType;
  readonly producerPaused: boolean;
  /**
   * A new consumer starts paused: the client resumes it (`resumeConsumer`) once its track is ready, so no keyframe is
   * lost. One asked for again is answered as it is.
   */
  readonly paused: boolean;
}

export interface ProducerClosed {
  readonly type: 'producer.closed';
  readonly producerId: string;
  readonly peerId: string;
  /** Consumers of it the room closed; tell their owners. */
  readonly consumers: readonly { readonly peerId: string; readonly consumerId: string }[];
  /** It went with its router's worker, not for a reason of the room's: the publisher lost media, not a right. */
  readonly workerLost: boolean;
}

/**
 * A worker of this room died: these peers' transports are gone and must be recreated (then re-produce). Besides the
 * peers that had a transport on the dead worker, it names those whose call a lost worker cut (see `#cut`), whose media
 * the room closed so that "gone" holds for them too.
 */
export interface MediaLost {
  readonly type: 'media.lost';
  readonly pid: number;
  readonly peerIds: readonly string[];
  /**
   * False when no live worker could take the room's main router: every call then fails `media_unavailable` until a
   * retry (backing off, while the room is open) rebuilds it and `mediarestored` says so.
   */
  readonly rebuilt: boolean;
}

/**
 * The room's main router is back after `medialost` said it could not be rebuilt (`rebuilt: false`): calls are served
 * again. Peers holding no transport (those the loss took, and any refused `media_unavailable` meanwhile) make their
 * media now.
 */
export interface MediaRestored {
  readonly type: 'media.restored';
}

/** First wait before a room whose main router could not be rebuilt tries again; doubles up to REBUILD_RETRY_MAX_MS. */
export const REBUILD_RETRY_FIRST_MS = 250;
export const REBUILD_RETRY_MAX_MS = 5_000;

/** Speaking microphones, loudest first (dBov, -127 to 0); empty on silence. Only in `transport` rooms. */
export interface AudioLevels {
  readonly type: 'audio.levels';
  readonly levels: readonly { readonly peerId: string; readonly producerId: string; readonly volume: number }[];
}

export interface RoomMediaEvents {
  producerclosed: [ProducerClosed];
  medialost: [MediaLost];
  mediarestored: [MediaRestored];
  audiolevels: [AudioLevels];
}

export interface RouterPlacement {
  readonly routerId: string;
  readonly pid: number;
  readonly main: boolean;
  readonly consumers: number;
  readonly pipedProducers: number;
}

interface Source {
  readonly peerId: string;
  readonly producer: types.Producer;
}

/**
 * One room's media. Producers live on the room's main router. Recv transports are placed, when created, on the first
 * router still within its consumer budget; when none is, a new router is made on the least-loaded worker (another
 * worker than the room's, while there is one) and the producers its consumers need are piped to it from the main
 * router (`pipeToRouter`, one pipe per producer and router). When a worker dies the room drops what was on it,
 * rebuilds its main router on a live worker if that was lost, and reports the peers whose transports were there.
 */
export class RoomMedia extends EventEmitter<RoomMediaEvents> {
  readonly roomId: string;
  readonly encryption: EncryptionMode;
  readonly #pool: MediaWorkerPool;
  readonly #listenInfo: types.TransportListenInfo;
  readonly #budget: number;
  readonly #expectedPerRecv: number;
  readonly #audioLevelIntervalMs: number;
  readonly #logger: Logger | undefined;
  readonly #peers = new Map<string, PeerMedia>();
  readonly #sources = new Map<string, Source>();
  /** The main router first; other routers of a dead worker are removed. */
  #routers: RoomRouter[];
  #audioLevels: types.AudioLevelObserver | undefined;
  /** Recv transport placement runs one at a time, so concurrent joins do not all squeeze under one budget. */
  #placement: Promise<unknown> = Promise.resolve();
  /** Consumers being made, by peer, transport and producer: a second ask while one is made waits for it. */
  readonly #consuming = new Map<string, Promise<ConsumerParams>>();
  /** Producers being made, by peer and source: they hold the source's one place until made or refused. */
  readonly #producing = new Set<string>();
  /** Transports being made, by peer and direction: they count against TRANSPORTS_PER_DIRECTION until adopted. */
  readonly #creating = new Map<string, number>();
  readonly #unsubscribe: () => void;
  /** The main router's rebuild under way, so a retry and a second loss do not make two. */
  #rebuilding: Promise<boolean> | undefined;
  /** The next try at rebuilding the main router, while none succeeded. */
  #rebuildRetry: NodeJS.Timeout | undefined;
  /**
   * Peers answered `media_unavailable` because a worker was lost (a call the worker's death cut, or one refused while
   * the main router is rebuilt), to be named in the room's next report: a call cut while making a peer's first
   * transport leaves nothing of it on the dead worker, and the peer would otherwise never hear its media can be made
   * again. Cut as the worker's channel closes, before the pool reports the death (after starting a replacement).
   */
  readonly #cut = new Set<string>();
  #closed = false;

  private constructor(options: RoomMediaOptions, main: RoomRouter) {
    super();
    this.roomId = options.roomId;
    this.encryption = options.encryption;
    this.#pool = options.pool;
    this.#listenInfo = Object.freeze({
      protocol: 'udp',
      ip: options.listenIp ?? '127.0.0.1',
      ...(options.announcedAddress ? { announcedAddress: options.announcedAddress } : {}),
    });
    this.#budget = options.consumerBudget ?? DEFAULT_CONSUMER_BUDGET;
    this.#expectedPerRecv = options.expectedConsumersPerRecvTransport ?? 1;
    this.#audioLevelIntervalMs = options.audioLevelIntervalMs ?? 800;
    this.#logger = options.logger;
    this.#routers = [main];
    this.#unsubscribe = options.pool.onWorkerLost((event) => void this.#recover(event));
  }

  static async create(options: RoomMediaOptions): Promise<RoomMedia> {
    if (!Number.isInteger(options.consumerBudget ?? 1) || (options.consumerBudget ?? 1) < 1) {
      throw new RangeError(`consumerBudget must be a positive integer, got ${options.consumerBudget}`);
    }
    // Subscribing to onWorkerLost (the constructor) after the router is made leaves no loss unseen, as long as nothing
    // awaits in between: the router arrives in the worker's reply, and from there to the constructor only microtasks
    // run, which Node finishes before any other I/O callback. A worker that died first rejects the pending request
    // (mediasoup closes its channel), and the pool tells its listeners only after a replacement start settled, later.
    const main = await RoomMedia.#newRouter(options.pool, options.roomId, new Set());
    const room = new RoomMedia(options, main);
    try {
      room.#audioLevels = await room.#observeAudioLevels(main);
    } catch (error) {
      room.close();
      throw error;
    }
    return room;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** What clients load their device with (and consume with): the main router's, less the audio level in sfu_blind. */
  get rtpCapabilities(): types.RtpCapabilities {
    return clientRtpCapabilities(this.#main().router.rtpCapabilities, this.encryption);
  }

  /** The room's routers, main first, and what each carries. */
  routers(): readonly RouterPlacement[] {
    return this.#routers.map((r, i) => ({
      routerId: r.router.id,
      pid: r.pid,
      main: i === 0,
      consumers: r.consumers,
      pipedProducers: r.pipedProducers,
    }));
  }

  peerIds(): readonly string[] {
    return [...this.#peers.keys()];
  }

  /** A WebRTC transport for `peerId`: send transports on the main router, recv transports where there is room. */
  async createTransport(peerId: string, direction: TransportDirection): Promise<WebRtcTransportParams> {
    const transport = await this.#served(peerId, () =>
      this.#place(peerId, direction, (router) => router.createWebRtcTransport({ listenInfos: [this.#listenInfo], enableSctp: false })),
    );
    return {
      id: transport.id,
      iceParameters: transport.iceParameters,
      iceCandidates: transport.iceCandidates,
      dtlsParameters: transport.dtlsParameters,
      sctpParameters: undefined,
    };
  }

  /**
   * A plain RTP transport, placed as `createTransport` places WebRTC ones. A send transport learns its sender's
   * address from the first packet (comedia); a recv transport is told where to send with `connectPlainTransport`.
   */
  async createPlainTransport(peerId: string, direction: TransportDirection): Promise<PlainTransportParams> {
    const transport = await this.#served(peerId, () =>
      this.#place(peerId, direction, (router) => router.createPlainTransport({ listenInfo: this.#listenInfo, rtcpMux: true, comedia: direction === 'send' })),
    );
    return { id: transport.id, ip: this.#listenInfo.announcedAddress ?? transport.tuple.localAddress, port: transport.tuple.localPort };
  }

  connectTransport(peerId: string, transportId: string, dtlsParameters: types.DtlsParameters): Promise<void> {
    return this.#served(peerId, () => this.#connectTransport(peerId, transportId, dtlsParameters));
  }

  async #connectTransport(peerId: string, transportId: string, dtlsParameters: types.DtlsParameters): Promise<void> {
    const entry = this.#peer(peerId).transport(transportId);
    if (entry.transport.type !== 'webrtc') throw new MediaError('transport_not_found', `transport ${transportId} is not a WebRTC transport`);
    // The worker refuses a second connect() as an internal error; it is the client's mistake, said as such.
    if (entry.connectCalled) throw new MediaError('already_connected', `transport ${transportId} is already connected`);
    entry.connectCalled = true;
    try {
      await (entry.transport as types.WebRtcTransport).connect({ dtlsParameters });
    } catch (error) {
      entry.connectCalled = false;
      throw refusedParameters(entry.transport, 'connect', error);
    }
  }

  /** Closes one transport of the peer with what it carries; no-op when either is gone. */
  closeTransport(peerId: string, transportId: string): void {
    this.#peers.get(peerId)?.closeTransport(transportId);
  }

  connectPlainTransport(peerId: string, transportId: string, remote: { readonly ip: string; readonly port: number }): Promise<void> {
    return this.#served(peerId, () => this.#connectPlainTransport(peerId, transportId, remote));
  }

  async #connectPlainTransport(peerId: string, transportId: string, remote: { readonly ip: string; readonly port: number }): Promise<void> {
    const entry = this.#peer(peerId).transport(transportId, 'recv');
    if (entry.transport.type !== 'plain') throw new MediaError('transport_not_found', `transport ${transportId} is not a plain transport`);
    if (entry.connectCalled) throw new MediaError('already_connected', `transport ${transportId} is already connected`);
    entry.connectCalled = true;
    try {
      await (entry.transport as types.PlainTransport).connect({ ip: remote.ip, port: remote.port });
    } catch (error) {
      entry.connectCalled = false;
      throw error;
    }
  }

  produce(peerId: string, transportId: string, request: ProduceRequest): Promise<{ readonly id: string }> {
    return this.#served(peerId, () => this.#produce(peerId, transportId, request));
  }

  async #produce(peerId: string, transportId: string, request: ProduceRequest): Promise<{ readonly id: string }> {
    const peer = this.#peer(peerId);
    const { transport, router } = peer.transport(transportId, 'send');
    const { source } = request.appData;
    if ((source === 'microphone' && request.kind !== 'audio') || (source === 'screen' && request.kind !== 'video')) {
      throw new MediaError('invalid_source', `a ${source} producer cannot be ${request.kind}`);
    }
    // The worker takes `kind` on trust: VP8 declared as audio would pass as a microphone, past every screen-share rule,
    // and listeners would consume it as video. RTX and FEC codecs carry their media's type too (`video/rtx`).
    assertServable(request.rtpParameters);
    const foreign = request.rtpParameters.codecs.find((codec) => !codec.mimeType.toLowerCase().startsWith(`${request.kind}/`));
    if (foreign) throw new MediaError('invalid_parameters', `a ${request.kind} producer cannot carry ${foreign.mimeType}`);
    // One microphone and one screen per peer: every producer is offered to every listener, and each recv transport
    // reserves budget for as many consumers as the room has producers, so a peer's extra copies of a source would
    // make the room add routers for nothing anyone needs.
    const slot = `${peerId}\n${source}`;
    if (this.publishes(peerId, source)) {
      throw new MediaError('producer_exists', `peer ${peerId} already publishes its ${source}: close that producer first`);
    }
    this.#producing.add(slot);
    try {
      const rtpParameters = producerRtpParameters(request.rtpParameters, this.encryption);
      let producer: types.Producer;
      try {
        producer = await transport.produce({ kind: request.kind, rtpParameters, appData: { peerId, source } });
      } catch (error) {
        throw refusedParameters(transport, 'produce', error);
      }
      if (peer.closed) {
        producer.close();
        throw new MediaError('peer_not_found', `peer ${peerId} left while producing`);
      }
      peer.addProducer(producer);
      this.#watchSource(peerId, producer, router);
      if (source === 'microphone') await this.#audioLevels?.addProducer({ producerId: producer.id });
      return { id: producer.id };
    } finally {
      this.#producing.delete(slot);
    }
  }

  /** Whether the peer has a live producer of `source`, or one being made. */
  publishes(peerId: string, source: MediaSource): boolean {
    if (this.#producing.has(`${peerId}\n${source}`)) return true;
    for (const producer of this.#peers.get(peerId)?.producers.values() ?? []) {
      if (!producer.closed && producer.appData.source === source) return true;
    }
    return false;
  }

  /**
   * A paused consumer of `producerId` on the peer's recv transport; when that transport is on another router than the
   * main one, the producer is piped there first (once per router).
   */
  async consume(peerId: string, transportId: string, producerId: string, rtpCapabilities: types.RtpCapabilities): Promise<ConsumerParams> {
    const peer = this.#peer(peerId);
    // Asked again (a retry, or a hostile client): the consumer it has, not another copy of every packet.
    for (const entry of peer.consumers.values()) {
      if (entry.sourceProducerId === producerId && entry.transportId === transportId && !entry.consumer.closed) return consumerParams(entry.consumer, producerId);
    }
    const key = `${peerId}\n${transportId}\n${producerId}`;
    const pending = this.#consuming.get(key);
    if (pending) return pending;
    const made = this.#served(peerId, () => this.#consume(peer, transportId, producerId, rtpCapabilities)).finally(() => this.#consuming.delete(key));
    this.#consuming.set(key, made);
    return made;
  }

  async #consume(peer: PeerMedia, transportId: string, producerId: string, rtpCapabilities: types.RtpCapabilities): Promise<ConsumerParams> {
    const peerId = peer.peerId;
    const { transport, router } = peer.transport(transportId, 'recv');
    const source = this.#sources.get(producerId);
    if (!source) throw new MediaError('producer_not_found', `room ${this.roomId} has no producer ${producerId}`);
    const capabilities = clientRtpCapabilities(rtpCapabilities, this.encryption);
    let localId: string;
    try {
      localId = await router.producerId(this.#main(), producerId);
    } catch (error) {
      // The listener's own router went with its worker: its media is lost (and reported with the loss), not the producer.
      if (router.closed && !peer.closed && isWorkerLoss(error)) throw error;
      // The producer closed while it was piped to this router (mediasoup's NotFoundError): a listener consuming what
      // was just announced as it ends, as on the main router, not a failure of the room.
      if (!this.#sources.has(producerId)) throw new MediaError('producer_not_found', `producer ${producerId} closed`);
      // The listener left meanwhile, and the router made for it went with its last transport.
      if (peer.closed || router.closed) throw new MediaError('peer_not_found', `peer ${peerId} left while consuming`);
      throw error;
    }
    if (!this.#sources.has(producerId)) throw new MediaError('producer_not_found', `producer ${producerId} closed`);
    if (!router.router.canConsume({ producerId: localId, rtpCapabilities: capabilities })) {
      throw new MediaError('cannot_consume', `peer ${peerId} cannot receive producer ${producerId} with its capabilities`);
    }
    const consumer = await transport.consume({ producerId: localId, rtpCapabilities: capabilities, paused: true });
    if (peer.closed || !this.#sources.has(producerId)) {
      consumer.close();
      throw new MediaError(peer.closed ? 'peer_not_found' : 'producer_not_found', `consumer of ${producerId} outlived its peer or producer`);
    }
    peer.addConsumer({ consumer, sourceProducerId: producerId, transportId });
    return consumerParams(consumer, producerId);
  }

  resumeConsumer(peerId: string, consumerId: string): Promise<void> {
    return this.#served(peerId, async () => {
      // A peer with no media yet has no consumer either: that, not a missing transport, is what the client got wrong.
      const peer = this.#peerIfAny(peerId);
      if (!peer) throw new MediaError('consumer_not_found', `peer ${peerId} has no consumer ${consumerId}`);
      await peer.consumer(consumerId).consumer.resume();
    });
  }

  /** Closes the producer; its consumers are closed and reported through `producerclosed`. */
  closeProducer(peerId: string, producerId: string): void {
    const producer = this.#peerIfAny(peerId)?.producers.get(producerId);
    if (!producer) throw new MediaError('producer_not_found', `peer ${peerId} has no producer ${producerId}`);
    producer.close();
  }

  /** Whether the peer holds an open transport. */
  hasTransports(peerId: string): boolean {
    for (const entry of this.#peers.get(peerId)?.transports.values() ?? []) if (!entry.transport.closed) return true;
    return false;
  }

  /** Closes the peer's consumers, producers (reported through `producerclosed`) and transports. No-op for a stranger. */
  removePeer(peerId: string): void {
    const peer = this.#peers.get(peerId);
    if (!peer) return;
    this.#peers.delete(peerId);
    peer.close();
  }

  /** Peers first, then the routers: the room's load leaves the pool. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    if (this.#rebuildRetry) clearTimeout(this.#rebuildRetry);
    this.#rebuildRetry = undefined;
    this.#cut.clear();
    for (const peer of this.#peers.values()) peer.close();
    this.#peers.clear();
    this.#audioLevels?.close();
    for (const router of this.#routers) router.close();
    this.removeAllListeners();
  }

  /**
   * A peer's call on the workers: one a worker's death cut (mediasoup's WorkerClosedError, the pending request aborted
   * as the channel closed) is the server's failure, answered `media_unavailable` like a call refused while the main
   * router is rebuilt, and the peer is owed the room's next report (`#cut`).
   */
  async #served<T>(peerId: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      const unavailable = error instanceof MediaError ? error.code === 'media_unavailable' : isWorkerLoss(error);
      if (!unavailable) throw error;
      if (this.#closed) throw new MediaError('room_closed', `room ${this.roomId} closed during the call`);
      this.#cut.add(peerId);
      if (error instanceof MediaError) throw error;
      throw new MediaError('media_unavailable', `room ${this.roomId} lost a media worker during the call; make your media again on media.reset`);
    }
  }

  /**
   * The peers `#cut` owes a report, their media closed: the report tells them all of it is gone (they make it again,
   * as `dropTransportsOn` has every peer of a loss do), and what lingered would count against their new transports.
   */
  #takeCut(): string[] {
    const peerIds = [...this.#cut];
    this.#cut.clear();
    for (const peerId of peerIds) {
      const peer = this.#peers.get(peerId);
      if (peer) for (const id of [...peer.transports.keys()]) peer.closeTransport(id);
    }
    return peerIds;
  }

  #main(): RoomRouter {
    if (this.#closed) throw new MediaError('room_closed', `room ${this.roomId} is closed`);
    const main = this.#routers[0];
    if (!main || main.closed) throw new MediaError('media_unavailable', `room ${this.roomId} is rebuilding its media`);
    return main;
  }

  #peer(peerId: string): PeerMedia {
    const peer = this.#peerIfAny(peerId);
    if (!peer) throw new MediaError('peer_not_found', `room ${this.roomId} has no media for peer ${peerId}`);
    return peer;
  }

  /** The peer's media, undefined before its first transport (or after it left); refused once the room is closed. */
  #peerIfAny(peerId: string): PeerMedia | undefined {
    if (this.#closed) throw new MediaError('room_closed', `room ${this.roomId} is closed`);
    return this.#peers.get(peerId);
  }

  async #place<T extends types.WebRtcTransport | types.PlainTransport>(
    peerId: string,
    direction: TransportDirection,
    create: (router: types.Router) => Promise<T>,
  ): Promise<T> {
    const main = this.#main();
    const key = `${peerId}\n${direction}`;
    const creating = this.#creating.get(key) ?? 0;
    let held = 0;
    for (const entry of this.#peers.get(peerId)?.transports.values() ?? []) if (entry.direction === direction && !entry.transport.closed) held++;
    if (held + creating >= TRANSPORTS_PER_DIRECTION) {
      throw new MediaError('transport_limit', `peer ${peerId} already holds ${TRANSPORTS_PER_DIRECTION} ${direction} transports (leave and join again to start afresh)`);
    }
    this.#creating.set(key, creating + 1);
    try {
      if (direction === 'send') return this.#adopt(peerId, direction, main, await create(main.router));
      const placed = this.#placement.then(async () => {
        const router = await this.#recvRouter();
        const transport = await create(router.router);
        const placedHere: types.Transport = transport;
        router.addRecvTransport(placedHere);
        placedHere.observer.once('close', () => this.#retireIfIdle(router));
        return this.#adopt(peerId, direction, router, transport);
      });
      this.#placement = placed.catch(() => undefined);
      return await placed;
    } finally {
      const left = (this.#creating.get(key) ?? 1) - 1;
      if (left > 0) this.#creating.set(key, left);
      else this.#creating.delete(key);
    }
  }

  #adopt<T extends PeerTransport['transport']>(peerId: string, direction: TransportDirection, router: RoomRouter, transport: T): T {
    if (this.#closed) {
      transport.close();
      throw new MediaError('room_closed', `room ${this.roomId} closed while creating a transport`);
    }
    let peer = this.#peers.get(peerId);
    if (!peer) this.#peers.set(peerId, (peer = new PeerMedia(peerId)));
    peer.addTransport({ transport, direction, router, connectCalled: false });
    return transport;
  }

  /**
   * A router other than the main one whose last recv transport closed goes, with the pipes that fed it: kept, it would
   * take a copy of every packet of the producers piped there for nobody. In the placement queue, so a placement
   * already on its way to it finishes first (and keeps it), and a later one does not find it.
   */
  #retireIfIdle(router: RoomRouter): void {
    const retired = this.#placement.then(() => {
      // A router closed under its transports is a lost worker's: #recover drops it and tells the peers it had.
      if (this.#closed || router.closed || router === this.#routers[0] || router.recvTransports > 0 || !this.#routers.includes(router)) return;
      this.#routers = this.#routers.filter((r) => r !== router);
      router.close();
      this.#logger?.info({ roomId: this.roomId, routers: this.#routers.length, pid: router.pid }, 'room left a router nobody listened on');
    });
    this.#placement = retired.catch(() => undefined);
  }

  /** The first router with room for one more listener, or a new one on the least-loaded other worker. */
  async #recvRouter(): Promise<RoomRouter> {
    const main = this.#main();
    const perRecv = Math.max(this.#expectedPerRecv, this.#sources.size);
    const roomy = this.#routers.find((r) => r.hasRoomFor(perRecv, this.#budget));
    if (roomy) return roomy;
    const router = await RoomMedia.#newRouter(this.#pool, this.roomId, new Set(this.#routers.map((r) => r.pid)));
    if (this.#closed || main.closed) {
      router.close();
      throw new MediaError(this.#closed ? 'room_closed' : 'media_unavailable', `room ${this.roomId} changed while adding a router`);
    }
    this.#routers.push(router);
    this.#logger?.info({ roomId: this.roomId, routers: this.#routers.length, pid: router.pid }, 'room spread to another router');
    return router;
  }

  static async #newRouter(pool: MediaWorkerPool, roomId: string, avoid: ReadonlySet<number>): Promise<RoomRouter> {
    const worker = pool.leastLoaded(avoid);
    const router = await worker.createRouter(roomId, { mediaCodecs: [...ROOM_MEDIA_CODECS] });
    return new RoomRouter(router, worker.pid);
  }

  async #observeAudioLevels(main: RoomRouter): Promise<types.AudioLevelObserver | undefined> {
    // sfu_blind: the server derives nothing from media, not even who is speaking.
    if (this.encryption !== 'transport') return undefined;
    const observer = await main.router.createAudioLevelObserver({ maxEntries: 16, threshold: -70, interval: this.#audioLevelIntervalMs });
    observer.on('volumes', (volumes) =>
      this.emit('audiolevels', {
        type: 'audio.levels',
        levels: volumes.flatMap(({ producer, volume }) => {
          const source = this.#sources.get(producer.id);
          return source ? [{ peerId: source.peerId, producerId: producer.id, volume }] : [];
        }),
      }),
    );
    observer.on('silence', () => this.emit('audiolevels', { type: 'audio.levels', levels: [] }));
    return observer;
  }

  #watchSource(peerId: string, producer: types.Producer, router: RoomRouter): void {
    this.#sources.set(producer.id, { peerId, producer });
    producer.observer.once('close', () => {
      this.#sources.delete(producer.id);
      if (this.#closed) return;
      const consumers: { peerId: string; consumerId: string }[] = [];
      for (const peer of this.#peers.values()) {
        for (const [consumerId, entry] of peer.consumers) {
          if (entry.sourceProducerId !== producer.id) continue;
          consumers.push({ peerId: peer.peerId, consumerId });
          entry.consumer.close();
        }
      }
      // A router closes under an open room only with its worker (mediasoup marks it closed before closing its transports).
      this.emit('producerclosed', { type: 'producer.closed', producerId: producer.id, peerId, consumers, workerLost: router.closed });
    });
  }

  async #recover(event: WorkerLost): Promise<void> {
    if (this.#closed) return;
    const dead = new Set(this.#routers.filter((r) => r.pid === event.pid));
    if (dead.size === 0) {
      // A call this loss cut while the room made a router there (a recv transport spreading to another worker). With
      // the main router down, the rebuild's own report (`medialost` or `mediarestored`) names them instead.
      if (this.#cut.size > 0 && !this.#routers[0]!.closed && !this.#rebuilding) {
        const peerIds = this.#takeCut();
        this.#logger?.warn({ roomId: this.roomId, pid: event.pid, peers: peerIds.length, rebuilt: true }, 'room media lost a worker');
        this.emit('medialost', { type: 'media.lost', pid: event.pid, peerIds, rebuilt: true });
      }
      return;
    }
    const mainLost = dead.has(this.#routers[0]!);
    // A lost main router stays first, closed, until its successor is up: calls meanwhile fail `media_unavailable`.
    this.#routers = this.#routers.filter((r, i) => i === 0 || !dead.has(r));
    const dropped = [...this.#peers.values()].filter((p) => p.dropTransportsOn(dead)).map((p) => p.peerId);
    // Also when only another router was lost while the main one waits for its retry: this loss must not say `rebuilt`.
    const rebuilt = mainLost || this.#routers[0]!.closed ? await this.#rebuildMain() : true;
    if (this.#closed) return;
    // Cut until now, the rebuild's wait included. Not rebuilt: they hold no transport, and `mediarestored` names them.
    const peerIds = [...new Set([...dropped, ...(rebuilt ? this.#takeCut() : [])])];
    this.#logger?.warn({ roomId: this.roomId, pid: event.pid, peers: peerIds.length, rebuilt }, 'room media lost a worker');
    this.emit('medialost', { type: 'media.lost', pid: event.pid, peerIds, rebuilt });
    if (!rebuilt) this.#retryRebuild(REBUILD_RETRY_FIRST_MS);
  }

  /** A new main router (and its AudioLevelObserver) on a live worker, unless one is up; false when it could not be. */
  #rebuildMain(): Promise<boolean> {
    this.#rebuilding ??= this.#newMain().finally(() => (this.#rebuilding = undefined));
    return this.#rebuilding;
  }

  async #newMain(): Promise<boolean> {
    if (!this.#routers[0]!.closed) return true;
    let main: RoomRouter | undefined;
    try {
      main = await RoomMedia.#newRouter(this.#pool, this.roomId, new Set(this.#routers.slice(1).map((r) => r.pid)));
      // Installed together: a producer made on a main router without its observer would never be reported speaking.
      const audioLevels = await this.#observeAudioLevels(main);
      if (this.#closed) {
        main.close();
        return false;
      }
      this.#routers[0] = main;
      this.#audioLevels = audioLevels;
      return true;
    } catch (error) {
      main?.close();
      this.#logger?.error({ err: error, roomId: this.roomId }, 'room media could not rebuild its main router');
      return false;
    }
  }

  /**
   * Tries the rebuild again after `delayMs`, backing off, until it succeeds or the room closes (its last member gone):
   * a lost worker's replacement may not be up yet, or the pool may be between workers, and without a retry the room
   * would refuse every call `media_unavailable` until it emptied, however soon workers were back.
   */
  #retryRebuild(delayMs: number): void {
    if (this.#closed || this.#rebuildRetry) return;
    this.#rebuildRetry = setTimeout(() => {
      this.#rebuildRetry = undefined;
      void this.#rebuildMain().then((rebuilt) => {
        if (this.#closed) return;
        if (!rebuilt) {
          this.#retryRebuild(Math.min(delayMs * 2, REBUILD_RETRY_MAX_MS));
          return;
        }
        this.#logger?.info({ roomId: this.roomId }, 'room media rebuilt its main router');
        // Refused meanwhile: their media closes, so they are among those holding none, whom `mediarestored` is for.
        this.#takeCut();
        this.emit('mediarestored', { type: 'media.restored' });
      });
    }, delayMs);
    // Not what keeps a process alive: close() clears it.
    this.#rebuildRetry.unref();
  }
}

/**
 * Encodings one producer may have: a consumer describes a producer's encodings as its spatial layers, which the
 * worker reads from a scalability mode of at most 99 (`S99T…`), so a producer of more is made and then fails every
 * listener's consume.
 */
export const MAX_ENCODINGS_PER_PRODUCER = 99;

/**
 * What mediasoup's validator lets through but the worker cannot serve, refused before mediasoup sees it:
 * - an encoding `maxBitrate` that is no whole number: mediasoup writes each request to a worker into that worker's one
 *   shared FlatBuffers builder and converts `maxBitrate` with BigInt() half-way through a producer's, so a fraction,
 *   text or null throws there and leaves the builder inside an unfinished object; every later request to the worker
 *   (every room's, closes included) then throws too;
 * - more encodings than a consumer can take (MAX_ENCODINGS_PER_PRODUCER).
 */
export function assertServable(rtpParameters: types.RtpParameters): void {
  const encodings = rtpParameters.encodings ?? [];
  if (encodings.length > MAX_ENCODINGS_PER_PRODUCER) {
    throw new MediaError('invalid_parameters', `at most ${MAX_ENCODINGS_PER_PRODUCER} encodings, got ${encodings.length}`);
  }
  for (const encoding of encodings) {
    const { maxBitrate } = encoding as { readonly maxBitrate?: unknown };
    if (maxBitrate !== undefined && !(Number.isSafeInteger(maxBitrate) && (maxBitrate as number) >= 0)) {
      throw new MediaError('invalid_parameters', `encoding maxBitrate must be a whole number of bits per second, got ${JSON.stringify(maxBitrate)}`);
    }
  }
}

function consumerParams(consumer: types.Consumer, producerId: string): ConsumerParams {
  return {
    id: consumer.id,
    producerId,
    kind: consumer.kind,
    rtpParameters: consumer.rtpParameters,
    type: consumer.type,
    producerPaused: consumer.producerPaused,
    paused: consumer.paused,
  };
}

/**
 * An error from the worker while it takes a client's parameters (a MID or SSRC already on the transport, simulcast
 * on a codec without it, a malformed DTLS fingerprint) is the client's mistake; the worker says so only in a message.
 * On a transport that closed meanwhile (the worker died, the peer left) it is not, and goes on as it is.
 */
function refusedParameters(transport: PeerTransport['transport'], step: string, error: unknown): unknown {
  if (transport.closed || error instanceof MediaError || isWorkerLoss(error)) return error;
  return new MediaError('invalid_parameters', `${step}: ${error instanceof Error ? error.message : String(error)}`);
}
