import type { Socket } from 'node:dgram';

/** Synthetic RTP for feeding mediasoup PlainTransports from Node (RFC 3550 headers, RFC 8285 one-byte extensions). */

export const OPUS_PAYLOAD_TYPE = 100;

/** An opus-sized RTP packet; with `audioLevel` (dBov, 0 to 127 below full scale) it carries RFC 6464 as extension id 1. */
export function rtpPacket(seq: number, timestamp: number, ssrc: number, payload: Buffer, audioLevel?: number): Buffer {
  const header = Buffer.alloc(12);
  header[0] = audioLevel === undefined ? 0x80 : 0x90; // version 2, extension bit when a level is carried
  header[1] = OPUS_PAYLOAD_TYPE;
  header.writeUInt16BE(seq & 0xffff, 2);
  header.writeUInt32BE(timestamp >>> 0, 4);
  header.writeUInt32BE(ssrc, 8);
  if (audioLevel === undefined) return Buffer.concat([header, payload]);
  // 0xBEDE profile, one 32-bit word: element id 1, length 1 (encoded 0), voice-activity bit and level, two pad bytes.
  const extension = Buffer.from([0xbe, 0xde, 0x00, 0x01, 0x10, 0x80 | (audioLevel & 0x7f), 0x00, 0x00]);
  return Buffer.concat([header, extension, payload]);
}

/** RTP rather than RTCP on a muxed port: RTCP packet types are 192-223 (RFC 5761). */
export function isRtp(message: Buffer): boolean {
  const type = message[1] ?? 0;
  return message.length > 12 && (type < 192 || type > 223);
}

export function rtpSsrc(message: Buffer): number {
  return message.readUInt32BE(8);
}

/** Sends one packet every `intervalMs` (20 ms: 50 packets/s, one opus frame each) from `socket` to `port`. */
export function startRtpStream(
  socket: Socket,
  port: number,
  ssrc: number,
  options: { readonly payload?: Buffer; readonly audioLevel?: number; readonly intervalMs?: number } = {},
): { stop(): void; readonly sent: () => number } {
  const payload = options.payload ?? Buffer.alloc(80, 0xfc);
  let seq = 0;
  const timer = setInterval(() => {
    seq += 1;
    socket.send(rtpPacket(seq, seq * 960, ssrc, payload, options.audioLevel), port, '127.0.0.1');
  }, options.intervalMs ?? 20);
  return { stop: () => clearInterval(timer), sent: () => seq };
}
