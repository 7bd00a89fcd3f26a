import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/** A masked text frame, as a client sends it (RFC 6455 5.2). */
export function clientTextFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const length = payload.length < 126 ? Buffer.from([0x80 | payload.length]) : Buffer.from([0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([Buffer.from([0x81]), length, mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))]);
}

/**
 * A WebSocket client on a bare TCP connection, for what `ws` and browsers never do: it writes its handshake and
 * whatever frames follow in one write, without waiting for the 101 (RFC 6455 4.1 says a client must wait).
 */
export class RawWebSocket {
  /** The server's answer to the handshake: its status line. */
  statusLine: string | undefined;
  /** Text messages received after the 101, parsed as JSON, in order. */
  readonly messages: Array<Record<string, unknown>> = [];
  closeCode: number | undefined;
  readonly #socket: Socket;
  #buffer = Buffer.alloc(0);

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (data: Buffer) => this.#read(data));
    socket.on('error', () => undefined);
  }

  /** Opens the connection and writes the handshake (GET `path`, the subprotocols, `headers`) and `frames` at once. */
  static open(port: number, path: string, protocols: readonly string[], headers: Readonly<Record<string, string>>, frames: readonly Buffer[]): RawWebSocket {
    const socket = connect(port, '127.0.0.1');
    const lines = [
      `GET ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      'Sec-WebSocket-Version: 13',
      `Sec-WebSocket-Protocol: ${protocols.join(', ')}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    ];
    socket.write(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), ...frames]));
    return new RawWebSocket(socket);
  }

  send(text: string): void {
    this.#socket.write(clientTextFrame(text));
  }

  close(): void {
    this.#socket.destroy();
  }

  #read(data: Buffer): void {
    this.#buffer = Buffer.concat([this.#buffer, data]);
    if (this.statusLine === undefined) {
      const end = this.#buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      this.statusLine = this.#buffer.subarray(0, this.#buffer.indexOf('\r\n')).toString('latin1');
      this.#buffer = this.#buffer.subarray(end + 4);
    }
    // Server frames are unmasked; the server's messages here are small and never fragmented.
    for (;;) {
      if (this.#buffer.length < 2) return;
      const opcode = this.#buffer[0]! & 0x0f;
      let length = this.#buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.#buffer.length < 4) return;
        length = this.#buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.#buffer.length < 10) return;
        length = Number(this.#buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.#buffer.length < offset + length) return;
      const payload = this.#buffer.subarray(offset, offset + length);
      this.#buffer = this.#buffer.subarray(offset + length);
      if (opcode === 0x1) this.messages.push(JSON.parse(payload.toString('utf8')) as Record<string, unknown>);
      else if (opcode === 0x8) this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
    }
  }
}
