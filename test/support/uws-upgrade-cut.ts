import type WebSocket from 'ws';

/**
 * Whether uWS cut this freshly opened socket right after its asynchronous upgrade: the cork() epilogue around
 * `upgrade()` can shut the new WebSocket down (uNetworking/uWebSockets#1928, fixed upstream in C++ by #1929, not in
 * the npm build we can use). The server then counts the connection gone and may never have sent what its `onOpen`
 * sends after an await. A WebSocket ping tells: uWS answers it with a pong unless the socket was already cut, in which
 * case the close (1006) comes instead. Test clients open such a connection again, as any client reconnects after 1006,
 * so that tests of counts and streams are not one connection short; it is said on stderr.
 */
export async function cutAfterUpgrade(ws: WebSocket, closed: Promise<number>): Promise<boolean> {
  let onPong: (() => void) | undefined;
  const answered = new Promise<false>((resolve) => ws.once('pong', (onPong = () => resolve(false))));
  ws.ping();
  const cut = await Promise.race([answered, closed.then((code) => code === 1006)]);
  if (onPong) ws.off('pong', onPong);
  if (cut) process.stderr.write(`${new URL(ws.url).pathname}: socket cut by uWS right after its upgrade (uNetworking/uWebSockets#1928); reconnecting\n`);
  return cut;
}

/**
 * Opens a client socket, opening it again (at most twice more) when uWS cut it right after its upgrade; `closed`
 * resolves with the close code the client saw.
 */
export async function openUncut(
  open: () => WebSocket,
  track: (ws: WebSocket) => void = () => undefined,
): Promise<{ ws: WebSocket; closed: Promise<number> }> {
  for (let attempt = 1; ; attempt++) {
    const ws = open();
    track(ws);
    const closed = new Promise<number>((resolve) => ws.once('close', resolve));
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    if (attempt === 3 || !(await cutAfterUpgrade(ws, closed))) return { ws, closed };
  }
}
