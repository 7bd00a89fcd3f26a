/**
 * The baselines of the runtime socket benchmark: a WebSocket server that sends every message straight back, in a
 * process of its own like the server under test. argv[2] picks the implementation:
 *
 *   uws  uWebSockets.js through the project's loader (transport/uws.ts, native binary only), with the limits the
 *        runtime endpoint sets (no compression, 32 KiB payload cap, 256 KiB backpressure, 60 s idle with pings):
 *        `app.ws('/*', { message: (ws, m, b) => ws.send(m, b) })`. uWS corks inside its message handler.
 *   ws   the `ws` package: `new WebSocketServer({ perMessageDeflate: false })`, `ws.send(data, { binary })` on each
 *        message.
 *
 * Neither parses, validates, authenticates or stores anything: they are the transport's ceiling on this machine. The
 * message comes back whole, so its `ref` does too: the client matches replies to messages by it, as it does the
 * runtime socket's `presence.updated` (which echoes the `ref`).
 */
import { WebSocketServer } from 'ws';
import { serveParent } from './bench-child.js';

export type EchoProtocol = Record<string, never>;
export interface EchoInfo {
  readonly port: number;
  readonly implementation: 'uws' | 'ws';
}

const implementation = process.argv[2];

async function listenUws(): Promise<{ port: number; close: () => void }> {
  // Loaded only here: the ws child need not load the native addon.
  const { uws, closeApp } = await import('../../transport/uws.js');
  const app = uws.App();
  app.ws('/*', {
    compression: uws.DISABLED,
    maxPayloadLength: 32 * 1024,
    maxBackpressure: 256 * 1024,
    idleTimeout: 60,
    sendPingsAutomatically: true,
    message: (ws, message, isBinary) => {
      ws.send(message, isBinary);
    },
  });
  return new Promise((resolve, reject) => {
    app.listen('127.0.0.1', 0, (socket) => {
      if (!socket) reject(new Error('uWS echo could not listen'));
      else resolve({ port: uws.us_socket_local_port(socket), close: () => closeApp(app) });
    });
  });
}

async function listenWs(): Promise<{ port: number; close: () => void }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, maxPayload: 32 * 1024 });
  server.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error(`unexpected address ${address}`);
  return { port: address.port, close: () => server.close() };
}

if (implementation !== 'uws' && implementation !== 'ws') throw new Error(`echo server: name uws or ws, not ${implementation}`);
const listening = implementation === 'uws' ? await listenUws() : await listenWs();
serveParent<EchoProtocol>({}, { port: listening.port, implementation } satisfies EchoInfo, async () => listening.close());
