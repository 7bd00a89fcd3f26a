import { createHmac, randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { crc32 } from 'node:zlib';

/**
 * Just enough of the WebRTC wire formats to talk to a mediasoup WebRtcTransport from Node without a browser: an ICE
 * connectivity check (RFC 8445 STUN Binding request) and a DTLS 1.2 ClientHello offering DTLS-SRTP.
 */

/** A STUN Binding request as an ICE-controlling agent nominating the pair (USE-CANDIDATE). */
export function stunBindingRequest(username: string, password: string): Buffer {
  const header = Buffer.alloc(20);
  header.writeUInt16BE(0x0001, 0); // Binding request
  header.writeUInt32BE(0x2112a442, 4); // magic cookie
  randomBytes(12).copy(header, 8); // transaction id
  let body = Buffer.concat([
    attribute(0x0006, Buffer.from(username)), // USERNAME: "<their ufrag>:<our ufrag>"
    attribute(0x0024, uint(0x6e001eff, 4)), // PRIORITY
    attribute(0x802a, randomBytes(8)), // ICE-CONTROLLING (tie-breaker)
    attribute(0x0025, Buffer.alloc(0)), // USE-CANDIDATE
  ]);
  // The length field covers each trailer as it is computed (RFC 5389 §15.4, §15.5).
  header.writeUInt16BE(body.length + 24, 2);
  const integrity = createHmac('sha1', password).update(Buffer.concat([header, body])).digest();
  body = Buffer.concat([body, attribute(0x0008, integrity)]);
  header.writeUInt16BE(body.length + 8, 2);
  const fingerprint = (crc32(Buffer.concat([header, body])) ^ 0x5354554e) >>> 0;
  return Buffer.concat([header, body, attribute(0x8028, uint(fingerprint, 4))]);
}

export function isStunSuccess(message: Buffer): boolean {
  return message.length >= 20 && message.readUInt16BE(0) === 0x0101 && message.readUInt32BE(4) === 0x2112a442;
}

/** The first flight of a DTLS 1.2 client, offering ECDHE-GCM suites and the SRTP profiles WebRTC uses. */
export function dtlsClientHello(): Buffer {
  const extensions = Buffer.concat([
    extension(0x000a, list16(0x001d, 0x0017)), // supported_groups: x25519, secp256r1
    extension(0x000b, Buffer.from([1, 0])), // ec_point_formats: uncompressed
    extension(0x000d, list16(0x0403, 0x0804, 0x0401)), // signature_algorithms
    extension(0x000e, Buffer.concat([list16(0x0008, 0x0007, 0x0001), Buffer.from([0])])), // use_srtp, no MKI
    extension(0x0017, Buffer.alloc(0)), // extended_master_secret
  ]);
  const hello = Buffer.concat([
    uint(0xfefd, 2), // DTLS 1.2
    randomBytes(32),
    Buffer.from([0, 0]), // empty session id, empty cookie
    list16(0xc02b, 0xc02f, 0xc02c, 0xc030), // ECDHE-{ECDSA,RSA}-AES{128,256}-GCM
    Buffer.from([1, 0]), // compression: null
    uint(extensions.length, 2),
    extensions,
  ]);
  // Handshake header: ClientHello, length, message_seq 0, one fragment holding it all.
  const handshake = Buffer.concat([Buffer.from([1]), uint(hello.length, 3), uint(0, 2), uint(0, 3), uint(hello.length, 3), hello]);
  // Record header: handshake, DTLS 1.0 record version (as clients send first), epoch 0, sequence 0.
  return Buffer.concat([Buffer.from([22]), uint(0xfeff, 2), uint(0, 2), uint(0, 6), uint(handshake.length, 2), handshake]);
}

export function isDtlsHandshake(message: Buffer): boolean {
  return message.length >= 13 && message[0] === 22 && message[1] === 0xfe;
}

export async function bindLoopback(): Promise<Socket> {
  const socket = createSocket('udp4');
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  return socket;
}

/** The next datagram on `socket` that `accept` takes, or a rejection naming `what` after `timeoutMs`. */
export function nextMessage(socket: Socket, accept: (m: Buffer) => boolean, what: string, timeoutMs = 10_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: Buffer): void => {
      if (!accept(message)) return;
      finish();
      resolve(message);
    };
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`no ${what} within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = (): void => {
      clearTimeout(timer);
      socket.off('message', onMessage);
    };
    socket.on('message', onMessage);
  });
}

function attribute(type: number, value: Buffer): Buffer {
  const padding = Buffer.alloc((4 - (value.length % 4)) % 4);
  return Buffer.concat([uint(type, 2), uint(value.length, 2), value, padding]);
}

function extension(type: number, data: Buffer): Buffer {
  return Buffer.concat([uint(type, 2), uint(data.length, 2), data]);
}

/** A list of 16-bit values behind its 16-bit byte length. */
function list16(...values: number[]): Buffer {
  return Buffer.concat([uint(values.length * 2, 2), ...values.map((v) => uint(v, 2))]);
}

/** Big-endian unsigned integer of `bytes` bytes (up to 6). */
function uint(value: number, bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  out.writeUIntBE(value, 0, bytes);
  return out;
}
