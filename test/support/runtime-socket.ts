import WebSocket from 'ws';
import { RuntimeClient } from '../../client/runtime-client.js';
import { jsonOf } from './http.js';
import { cutAfterUpgrade } from './uws-upgrade-cut.js';
import { waitFor } from './wait.js';

/** A test client of the Runtime plane's sockets (JSON codec): what it heard, how it closed. */
export interface Socket {
  readonly ws: WebSocket;
  readonly messages: Array<Record<string, unknown>>;
  /** Payload bytes of every frame received, in order. */
  readonly frameBytes: number[];
  readonly closed: Promise<{ code: number; reason: string }>;
  next(type: string): Promise<Record<string, unknown>>;
  send(message: unknown): void;
}

/**
 * Opens a socket; resolves once open, or rejects with the HTTP status and body of a refused upgrade. A socket uWS cut
 * right after its upgrade is opened again (see cutAfterUpgrade). `maxPayload`: like a careful client, refuse frames
 * over the protocol's bound (ws closes the socket with 1009).
 */
export async function connect(url: string, protocols: string[], origin: string, maxPayload?: number): Promise<Socket> {
  for (let attempt = 1; ; attempt += 1) {
    const socket = await connectOnce(url, protocols, origin, maxPayload);
    if (attempt === 3 || !(await cutAfterUpgrade(socket.ws, socket.closed.then((c) => c.code)))) return socket;
  }
}

function connectOnce(url: string, protocols: string[], origin: string, maxPayload: number | undefined): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { origin, ...(maxPayload === undefined ? {} : { maxPayload }) });
    const messages: Array<Record<string, unknown>> = [];
    const frameBytes: number[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.on('message', (data) => {
      frameBytes.push((data as Buffer).byteLength);
      messages.push(JSON.parse(data.toString()) as Record<string, unknown>);
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, headers: res.headers, body: JSON.parse(body || '{}') as Record<string, unknown> })));
    });
    ws.on('error', (error) => reject(error));
    ws.on('open', () =>
      resolve({
        ws,
        messages,
        frameBytes,
        closed,
        send: (message) => ws.send(JSON.stringify(message)),
        next: (type) => waitFor(() => messages.find((m) => m.type === type), `a ${type} message (got ${JSON.stringify(messages)})`),
      }),
    );
  });
}

/** The runtime socket of an active page (its lease in the query), with the page's bearer and origin unless given. */
export const runtimeSocket = (page: RuntimeClient, bearer = page.accessToken, origin = page.origin, maxPayload?: number): Promise<Socket> =>
  connect(page.socketUrl(), RuntimeClient.subprotocols(bearer), origin, maxPayload);

export const controlUrl = (serverUrl: string): string => `${serverUrl.replace(/^http/, 'ws')}/v1/runtime/control`;

export const controlToken = async (page: RuntimeClient): Promise<string> => String((await jsonOf(await page.controlToken())).controlToken);

/** A refused or accepted upgrade, as the server answered it. */
export interface Answer {
  readonly status: number;
  readonly retryAfter?: string;
  readonly contentType?: string;
  readonly code?: string;
  readonly wwwAuthenticate?: string;
}

/**
 * One upgrade attempt, told by the server's answer alone (101 or the refusal): an accepted socket is dropped at once,
 * so each call is exactly one upgrade on the server (no reconnect as the suite's socket helper does).
 */
export function upgrade(url: string, protocols: string[], origin: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { origin });
    ws.on('upgrade', () => {
      resolve({ status: 101 });
      ws.terminate();
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          retryAfter: res.headers['retry-after'],
          contentType: res.headers['content-type'],
          wwwAuthenticate: res.headers['www-authenticate'],
          code: (JSON.parse(body || '{}') as { code?: string }).code,
        }),
      );
    });
    ws.on('error', (error) => {
      if (!/Unexpected server response|closed before/.test(error.message)) reject(error);
    });
  });
}
