import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

export type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_listen_socket } from 'uWebSockets.js';

/**
 * The uWebSockets.js package silently falls back to a pure-JavaScript imitation when its native binary does not load
 * (wrong Node ABI, wrong platform, or UWS_USE_FALLBACK set). That imitation lacks the native performance and limits
 * this server is built on, so we load the package once, check for the native-only `getParts`, and refuse to run
 * otherwise, saying why.
 */
function loadNativeUws(): typeof UWS {
  const require = createRequire(import.meta.url);
  if (/^(1|true)$/i.test(process.env.UWS_USE_FALLBACK ?? '')) {
    throw new Error('UWS_USE_FALLBACK is set: this server runs only on the native uWebSockets.js binary; unset it.');
  }
  const loaded = require('uWebSockets.js') as typeof UWS & { getParts?: unknown };
  if (typeof loaded.getParts !== 'function') {
    const binary = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
    throw new Error(
      `uWebSockets.js could not load its native binary ${binary} (Node ${process.version}, ABI ${process.versions.modules}) ` +
        'and fell back to its JavaScript imitation, which this server refuses to serve with. ' +
        'Use a Node.js version the installed uWebSockets.js ships a binary for (Node 20 with the pinned package).',
    );
  }
  return loaded;
}

export const uws: typeof UWS = loadNativeUws();

/** Closes an app's listen sockets and open connections. The build has `close()` at run time but not in its types. */
export function closeApp(app: UWS.TemplatedApp): void {
  const close = (app as UWS.TemplatedApp & { close?: () => void }).close;
  if (typeof close === 'function') close.call(app);
}

/** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT (the typings' ListenOptions enum exists in the types only). */
const LISTEN_EXCLUSIVE_PORT = 1;

type ListenCallback = (socket: UWS.us_listen_socket | false) => void;

/**
 * Listens on `host:port` alone. Without the exclusive option uSockets sets SO_REUSEPORT, and Linux then lets another
 * process bind the very same address and port and shares the connections between the two: a second server started on
 * a port in use came up without a word and took part of the first one's traffic. The native binding takes the options
 * between port and callback; the typings declare that form only without a host.
 */
export function listenExclusive(app: UWS.TemplatedApp, host: string, port: number, callback: ListenCallback): void {
  const listen = app.listen as unknown as (host: string, port: number, options: number, callback: ListenCallback) => UWS.TemplatedApp;
  listen.call(app, host, port, LISTEN_EXCLUSIVE_PORT, callback);
}

/**
 * A request's headers (names lower-case, as uWS gives them), a repeated header's values joined with ", " as RFC 9110
 * 5.3 allows: one view for the gateway and the WebSocket paths beside it, so both judge framing and credentials alike.
 * Read while uWS still holds the request (before any await).
 */
export function requestHeaders(req: UWS.HttpRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  req.forEach((name, value) => {
    const previous = headers[name];
    headers[name] = previous === undefined ? value : `${previous}, ${value}`;
  });
  return headers;
}
