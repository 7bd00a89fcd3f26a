import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { parentPort, workerData } from 'node:worker_threads';

/**
 * UDP sinks of the media stage bench, in a thread of their own so that counting ~100,000 packets/s does not delay the
 * main thread's senders. Binds `count` loopback sockets, posts their ports, then adds one to `counters[i]` (shared
 * memory the main thread reads) for each datagram on socket i. Closes its sockets on the message 'close'.
 */
const { count, counters } = workerData as { count: number; counters: SharedArrayBuffer };
const tally = new Int32Array(counters);
const sockets: Socket[] = [];

for (let i = 0; i < count; i += 1) {
  const socket = createSocket('udp4');
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  // The kernel caps this at net.core.rmem_max; as much headroom as it allows against bursts.
  socket.setRecvBufferSize(4 * 1024 * 1024);
  socket.on('message', () => Atomics.add(tally, i, 1));
  sockets.push(socket);
}
parentPort!.postMessage({ ports: sockets.map((s) => s.address().port) });
parentPort!.once('message', () => {
  for (const s of sockets) s.close();
  parentPort!.close();
});
