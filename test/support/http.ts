import { connect } from 'node:net';
import type { Logger } from 'pino';
import { createLogger } from '../../server/logger.js';
import type { IdempotencyStore } from '../../storage/idempotency-store.js';
import type { CredentialVerifiers } from '../../transport/http/credentials.js';
import { HttpGateway, type HttpObserver } from '../../transport/http/gateway.js';
import type { AnyRoute } from '../../transport/http/route.js';
import { closeApp, uws, type TemplatedApp } from '../../transport/uws.js';

export interface TestGateway {
  readonly url: string;
  readonly gateway: HttpGateway;
  close(): void;
}

/** A real uWebSockets.js app on a free loopback port serving `routes` through the real gateway. */
export async function startGateway(options: {
  routes: readonly AnyRoute[];
  idempotency: IdempotencyStore;
  verifiers?: CredentialVerifiers;
  maxBodyBytes?: number;
  observer?: HttpObserver;
  logger?: Logger;
  corsOrigins?: (origin: string) => Promise<boolean>;
}): Promise<TestGateway> {
  const gateway = new HttpGateway({
    routes: options.routes,
    verifiers: options.verifiers ?? {},
    idempotency: options.idempotency,
    logger: options.logger ?? createLogger('silent'),
    maxBodyBytes: options.maxBodyBytes ?? 64 * 1024,
    ...(options.observer === undefined ? {} : { observer: options.observer }),
    ...(options.corsOrigins === undefined ? {} : { corsOrigins: options.corsOrigins }),
  });
  const app = uws.App();
  gateway.mount(app);
  const port = await listenOnLoopback(app);
  return { url: `http://127.0.0.1:${port}`, gateway, close: () => closeApp(app) };
}

/** Listens `app` on a free loopback port and resolves with it; `closeApp(app)` closes it again. */
export function listenOnLoopback(app: TemplatedApp): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(uws.us_socket_local_port(socket)) : reject(new Error('listen failed')))),
  );
}

export async function jsonOf(response: Response): Promise<Record<string, unknown>> {
  return (await response.json()) as Record<string, unknown>;
}

/**
 * Writes `request` on a fresh TCP connection to `port`, then `later` a moment after (bytes a proxy would take for the
 * first request's body); resolves with everything received (latin1) once the server closes the connection, or after
 * `ms` with `closed: false`. For what a normal client would normalise: framing, pipelining, smuggling.
 */
export function rawExchange(port: number, request: string, options: { later?: string; ms?: number } = {}): Promise<{ readonly text: string; readonly closed: boolean }> {
  const { later = '', ms = 2_000 } = options;
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => undefined);
    const finish = (closed: boolean): void => {
      clearTimeout(timer);
      clearTimeout(follow);
      socket.destroy();
      resolve({ text, closed });
    };
    const timer = setTimeout(() => finish(false), ms);
    const follow = setTimeout(() => later && socket.writable && socket.write(later), 300);
    socket.on('close', () => finish(true));
    socket.write(request);
  });
}
