import type { types } from 'mediasoup-client';
import type { ConsumerMeasurement, ProducerMeasurement } from './page-api.js';

/**
 * Chromium computes `audioLevel` and `totalAudioEnergy` of an inbound audio stream only while its track plays out,
 * and decodes video only for a sink: every consumed track gets a media element (the autoplay flag lets it start).
 */
export function play(track: MediaStreamTrack): HTMLMediaElement {
  const element = document.createElement(track.kind === 'video' ? 'video' : 'audio');
  element.autoplay = true;
  element.muted = track.kind === 'video';
  element.srcObject = new MediaStream([track]);
  document.body.append(element);
  void element.play().catch((error: unknown) => console.error(`playback of ${track.kind} failed: ${String(error)}`));
  return element;
}

export function stopPlaying(element: HTMLMediaElement): void {
  element.srcObject = null;
  element.remove();
}

export async function measureConsumer(consumer: types.Consumer): Promise<ConsumerMeasurement> {
  const stats = statsOfType(await consumer.getStats(), 'inbound-rtp');
  return {
    consumerId: consumer.id,
    producerId: consumer.producerId,
    kind: consumer.kind,
    packetsReceived: numberOf(stats, 'packetsReceived'),
    packetsLost: numberOf(stats, 'packetsLost'),
    bytesReceived: numberOf(stats, 'bytesReceived'),
    totalAudioEnergy: numberOf(stats, 'totalAudioEnergy'),
    audioLevel: numberOf(stats, 'audioLevel'),
    framesDecoded: numberOf(stats, 'framesDecoded'),
    frameWidth: numberOf(stats, 'frameWidth'),
    frameHeight: numberOf(stats, 'frameHeight'),
  };
}

export async function measureProducer(producer: types.Producer, source: ProducerMeasurement['source']): Promise<ProducerMeasurement> {
  const stats = statsOfType(await producer.getStats(), 'outbound-rtp');
  return {
    producerId: producer.id,
    kind: producer.kind,
    source,
    packetsSent: numberOf(stats, 'packetsSent'),
    bytesSent: numberOf(stats, 'bytesSent'),
    framesEncoded: numberOf(stats, 'framesEncoded'),
  };
}

// A producer with simulcast has one outbound-rtp per layer; a consumer has one inbound-rtp. Summed either way.
function statsOfType(report: RTCStatsReport, type: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  report.forEach((entry: Record<string, unknown>) => {
    if (entry.type === type) out.push(entry);
  });
  return out;
}

function numberOf(entries: readonly Record<string, unknown>[], field: string): number {
  return entries.reduce((sum, entry) => {
    const value = entry[field];
    return typeof value === 'number' ? sum + value : sum;
  }, 0);
}
