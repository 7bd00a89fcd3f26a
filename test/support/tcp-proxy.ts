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
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const listen = async (port: number): Promise<Server> => {
    const server = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
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
    close: stop,
  };
}
