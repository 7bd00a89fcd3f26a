import { Device, type types } from 'mediasoup-client';
import { Chrome111 } from 'mediasoup-client/handlers/Chrome111';
import type * as z from 'zod';
import { measureConsumer, measureProducer, play, stopPlaying } from './measurements.js';
import type {
  ConsumerMeasurement,
  MediaParameters,
  MediaSignalType,
  ProducerMeasurement,
  ScreenProfile,
} from './page-api.js';
import { ConsumedSchema, ProducedSchema, TransportCreatedSchema } from './signal-results.js';

/** Sends one media request to the SFU and resolves with its `result` (rejects on a refusal). */
export type Signal = (type: MediaSignalType, payload: Readonly<Record<string, unknown>>) => Promise<unknown>;

type Source = 'microphone' | 'screen';

interface ScreenEncoding {
  readonly frameRate: number;
  readonly maxBitrate: number;
  readonly contentHint: 'detail' | 'motion';
}

// Slides: few frames, each sharp (contentHint `detail` makes the encoder drop frames before resolution).
// Motion: a fluid picture, resolution gives way first.
const SCREEN_ENCODINGS: Readonly<Record<ScreenProfile, ScreenEncoding>> = {
  slides: { frameRate: 5, maxBitrate: 1_500_000, contentHint: 'detail' },
  motion: { frameRate: 30, maxBitrate: 2_500_000, contentHint: 'motion' },
};

interface Consuming {
  readonly consumer: types.Consumer;
  readonly element: HTMLMediaElement;
}

/**
 * The participant's mediasoup-client objects: one Device, at most one send and one recv transport (created on first
 * use), its producers and consumers. Knows nothing of how requests reach the SFU: that is the `signal`.
 */
export class MediaSession {
  readonly #signal: Signal;
  readonly #handlerFactory = Chrome111.createFactory({});
  #device: Device | undefined;
  readonly #transports = new Map<'send' | 'recv', Promise<types.Transport>>();
  readonly #producers = new Map<string, { readonly producer: types.Producer; readonly source: Source }>();
  readonly #consumers = new Map<string, Consuming>();

  constructor(signal: Signal) {
    this.#signal = signal;
  }

  /** What this browser can receive before any Device is loaded: what `room.join` carries. */
  nativeRtpCapabilities(): Promise<types.RtpCapabilities> {
    return this.#handlerFactory.getNativeRtpCapabilities({ direction: 'recvonly' });
  }

  async createDevice(routerRtpCapabilities: MediaParameters): Promise<types.RtpCapabilities> {
    const device = new Device({ handlerFactory: this.#handlerFactory });
    // The router's capabilities are mediasoup's own object, passed through unchanged; Device.load validates them.
    await device.load({ routerRtpCapabilities: routerRtpCapabilities as types.RtpCapabilities });
    this.#device = device;
    return device.rtpCapabilities;
  }

  async publishMicrophone(): Promise<{ producerId: string }> {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true, video: false });
    const track = onlyTrack(stream.getAudioTracks(), 'microphone');
    return this.#produce('microphone', { track, codecOptions: { opusStereo: false, opusDtx: false } });
  }

  async publishScreen(profile: ScreenProfile): Promise<{ producerId: string }> {
    const encoding = SCREEN_ENCODINGS[profile];
    const stream = await navigator.mediaDevices.getDisplayMedia({ video: { frameRate: encoding.frameRate }, audio: false });
    const track = onlyTrack(stream.getVideoTracks(), 'screen');
    track.contentHint = encoding.contentHint;
    const vp8 = this.#loadedDevice().rtpCapabilities.codecs?.find((c) => c.mimeType.toLowerCase() === 'video/vp8');
    if (!vp8) throw new Error('the router offers no VP8: the screen is published as VP8');
    return this.#produce('screen', {
      track,
      codec: vp8,
      encodings: [{ maxBitrate: encoding.maxBitrate, maxFramerate: encoding.frameRate }],
    });
  }

  async consume(producerId: string): Promise<{ consumerId: string; kind: 'audio' | 'video' }> {
    const transport = await this.#transport('recv');
    const consumed = parse(ConsumedSchema, await this.#signal('consume', { transportId: transport.id, producerId }), 'consume');
    const consumer = await transport.consume({
      id: consumed.consumerId,
      producerId: consumed.producerId,
      kind: consumed.kind,
      rtpParameters: consumed.rtpParameters as types.RtpParameters,
    });
    const element = play(consumer.track);
    this.#consumers.set(consumer.id, { consumer, element });
    consumer.on('transportclose', () => this.#dropConsumer(consumer.id));
    consumer.on('trackended', () => this.#dropConsumer(consumer.id));
    await this.#signal('consumer.resume', { consumerId: consumer.id });
    return { consumerId: consumer.id, kind: consumer.kind };
  }

  /** Forgets the consumers of a producer the server reported gone (`producer.removed`). */
  producerRemoved(producerId: string): void {
    for (const [id, { consumer }] of this.#consumers) if (consumer.producerId === producerId) this.#dropConsumer(id);
  }

  closeProducer(producerId: string): void {
    this.#producers.get(producerId)?.producer.close();
    this.#producers.delete(producerId);
  }

  consumerStats(): Promise<ConsumerMeasurement[]> {
    return Promise.all([...this.#consumers.values()].map(({ consumer }) => measureConsumer(consumer)));
  }

  producerStats(): Promise<ProducerMeasurement[]> {
    return Promise.all([...this.#producers.values()].map(({ producer, source }) => measureProducer(producer, source)));
  }

  hasDevice(): boolean {
    return this.#device !== undefined;
  }

  /** Closes everything local; the Device stays loaded (the router's capabilities do not change). */
  reset(): void {
    for (const id of this.#consumers.keys()) this.#dropConsumer(id);
    for (const { producer } of this.#producers.values()) producer.close();
    this.#producers.clear();
    for (const pending of this.#transports.values()) void pending.then((t) => t.close(), () => undefined);
    this.#transports.clear();
  }

  async #produce(source: Source, options: types.ProducerOptions): Promise<{ producerId: string }> {
    const transport = await this.#transport('send');
    const producer = await transport.produce({ ...options, appData: { source } });
    this.#producers.set(producer.id, { producer, source });
    return { producerId: producer.id };
  }

  /** The transport of that direction, created on first use; a failed creation is not kept, so a retry asks again. */
  #transport(direction: 'send' | 'recv'): Promise<types.Transport> {
    const existing = this.#transports.get(direction);
    if (existing) return existing;
    const created = this.#createTransport(direction);
    this.#transports.set(direction, created);
    created.catch(() => {
      if (this.#transports.get(direction) === created) this.#transports.delete(direction);
    });
    return created;
  }

  async #createTransport(direction: 'send' | 'recv'): Promise<types.Transport> {
    const device = this.#loadedDevice();
    const created = parse(TransportCreatedSchema, await this.#signal('transport.create', { direction }), 'transport.create');
    // ICE and DTLS parameters come from mediasoup on the server, unchanged.
    const options = {
      id: created.transportId,
      iceParameters: created.iceParameters as types.IceParameters,
      iceCandidates: created.iceCandidates as types.IceCandidate[],
      dtlsParameters: created.dtlsParameters as types.DtlsParameters,
    };
    const transport = direction === 'send' ? device.createSendTransport(options) : device.createRecvTransport(options);
    transport.on('connect', ({ dtlsParameters }, callback, errback) => {
      this.#signal('transport.connect', { transportId: transport.id, dtlsParameters }).then(() => callback(), errback);
    });
    transport.on('produce', ({ kind, rtpParameters, appData }, callback, errback) => {
      this.#signal('produce', { transportId: transport.id, kind, source: appData.source, rtpParameters })
        .then((result) => callback({ id: parse(ProducedSchema, result, 'produce').producerId }))
        .catch(errback);
    });
    return transport;
  }

  #dropConsumer(id: string): void {
    const entry = this.#consumers.get(id);
    if (!entry) return;
    this.#consumers.delete(id);
    entry.consumer.close();
    stopPlaying(entry.element);
  }

  #loadedDevice(): Device {
    if (!this.#device) throw new Error('no Device yet: call createDevice (or join) first');
    return this.#device;
  }
}

function onlyTrack(tracks: MediaStreamTrack[], what: string): MediaStreamTrack {
  const [track] = tracks;
  if (!track) throw new Error(`the browser gave no ${what} track`);
  return track;
}

export function parse<T>(schema: z.ZodType<T>, value: unknown, request: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Error(`unexpected ${request} result: ${parsed.error.message}`);
  return parsed.data;
}
