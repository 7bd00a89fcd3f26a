import type { types } from 'mediasoup';
import type { MediaSignalType } from '../media/browser/page-api.js';

/**
 * One participant's media on a real mediasoup Router, answering the media requests of the test page's exposed signal
 * with the result shapes of test/media/browser/signal-results.ts. It stands in for the control plane only where a
 * test is about media flow: no rooms, seats or grants. WebRtcTransports listen on udp 127.0.0.1.
 */
export class LoopbackSfuPeer {
  readonly #router: types.Router;
  readonly #rtpCapabilities: types.RtpCapabilities;
  readonly #transports = new Map<string, types.WebRtcTransport>();
  readonly producers = new Map<string, types.Producer>();
  readonly consumers = new Map<string, types.Consumer>();

  /** `rtpCapabilities`: the page's Device capabilities (what `createDevice` resolved with). */
  constructor(router: types.Router, rtpCapabilities: types.RtpCapabilities) {
    this.#router = router;
    this.#rtpCapabilities = rtpCapabilities;
  }

  async handle(type: MediaSignalType, payload: Readonly<Record<string, unknown>>): Promise<Readonly<Record<string, unknown>>> {
    switch (type) {
      case 'transport.create': {
        const transport = await this.#router.createWebRtcTransport({ listenInfos: [{ protocol: 'udp', ip: '127.0.0.1' }] });
        this.#transports.set(transport.id, transport);
        const { iceParameters, iceCandidates, dtlsParameters } = transport;
        return { transportId: transport.id, iceParameters, iceCandidates, dtlsParameters };
      }
      case 'transport.connect':
        // The page's DTLS parameters as mediasoup-client produced them.
        await this.#transport(payload).connect({ dtlsParameters: payload.dtlsParameters as types.DtlsParameters });
        return {};
      case 'produce': {
        const kind = payload.kind === 'video' ? 'video' : 'audio';
        const producer = await this.#transport(payload).produce({
          kind,
          rtpParameters: payload.rtpParameters as types.RtpParameters,
          appData: { source: payload.source },
        });
        this.producers.set(producer.id, producer);
        return { producerId: producer.id };
      }
      case 'consume': {
        const producerId = stringField(payload, 'producerId');
        if (!this.#router.canConsume({ producerId, rtpCapabilities: this.#rtpCapabilities }))
          throw new Error(`this page cannot consume ${producerId}`);
        const consumer = await this.#transport(payload).consume({ producerId, rtpCapabilities: this.#rtpCapabilities, paused: true });
        this.consumers.set(consumer.id, consumer);
        return { consumerId: consumer.id, producerId, kind: consumer.kind, rtpParameters: consumer.rtpParameters };
      }
      case 'consumer.resume': {
        const consumerId = stringField(payload, 'consumerId');
        const consumer = this.consumers.get(consumerId);
        if (!consumer) throw new Error(`unknown consumer ${consumerId}`);
        await consumer.resume();
        return {};
      }
    }
  }

  close(): void {
    for (const transport of this.#transports.values()) transport.close();
    this.#transports.clear();
  }

  #transport(payload: Readonly<Record<string, unknown>>): types.WebRtcTransport {
    const id = stringField(payload, 'transportId');
    const transport = this.#transports.get(id);
    if (!transport) throw new Error(`unknown transport ${id}`);
    return transport;
  }
}

function stringField(payload: Readonly<Record<string, unknown>>, field: string): string {
  const value = payload[field];
  if (typeof value !== 'string') throw new Error(`${field} must be a string`);
  return value;
}
