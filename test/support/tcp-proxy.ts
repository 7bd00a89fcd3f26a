import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of another port, which a test can cut: a dependency that goes away (connections
 * dropped, new ones refused) and comes back on the same address, without stopping the real one behind it.
 */
export interface TcpProxy {
  readonly port: number;
  /** Drops every open connection and refuses new ones (ECONNREFUSED). */
  cut(): Promise<void>;
  /** Accepts again, on the same port. */
  restore(): Promise<void>;
  /**
   * The open connections go silent, both ways, without closing (a black hole: a middlebox that lost their state, a
   * half-open connection); new connections pass as before.
   */
  stall(): void;
  /** While on, new connections are accepted and then hear nothing, and nothing they send is passed on. */
  blackHoleNew(on: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let blackHoling = false;
  const pairs = new Set<{ readonly client: Socket; readonly upstream: Socket; stalled: boolean }>();
  const listen = async (port: number): Promise<Server> => {
    const server = createServer((client) => {
      if (blackHoling) {
        sockets.add(client);
        client.on('close', () => sockets.delete(client));
        client.on('error', () => {});
        client.pause();
        return;
      }
      const upstream = connect(targetPort, targetHost);
      const pair = { client, upstream, stalled: false };
      pairs.add(pair);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => pairs.delete(pair));
      // A stalled connection's end is not passed on either: the other side hears nothing.
      client.on('close', () => pair.stalled || upstream.destroy());
      upstream.on('close', () => pair.stalled || client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return server;
  };
  let server: Server | undefined = await listen(0);
  const port = (server.address() as { port: number }).port;
  const stop = async (): Promise<void> => {
    const closing = server;
    server = undefined;
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => (closing ? closing.close(() => resolve()) : resolve()));
  };
  return {
    port,
    cut: stop,
    restore: async () => {
      server ??= await listen(port);
    },
    stall: () => {
      for (const pair of pairs) {
        pair.stalled = true;
        pair.client.unpipe(pair.upstream);
        pair.upstream.unpipe(pair.client);
        pair.client.pause();
        pair.upstream.pause();
      }
      pairs.clear();
    },
    blackHoleNew: (on) => {
      blackHoling = on;
    },
    close: stop,
  };
}

/** A proxy in front of the Postgres of `databaseUrl`, and the same URL through it. */
export async function proxyDatabase(databaseUrl: string): Promise<{ proxy: TcpProxy; url: string }> {
  const url = new URL(databaseUrl);
  const proxy = await startTcpProxy(url.hostname, Number(url.port));
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return { proxy, url: url.href };
}
