/**
 * Holds idle runtime sockets for bench/runtime.bench.ts, in a process of its own: every loopback connection costs
 * one descriptor on each side, so the client side gets its own open-file limit instead of sharing the bench's.
 * A socket counts as held once the server sent `ready` (the upgrade passed the fence and onOpen ran) and it is still
 * open a moment later (see `openHeld`: sockets the server drops right after `ready` are counted and reopened).
 */
import type WebSocket from 'ws';
import { serveParent } from './bench-child.js';
import { closeSocket, openHeld, type SocketTarget } from './ws-load.js';

export interface HolderStatus {
  readonly open: number;
  /** Sockets the server closed (or that broke) after they were held. */
  readonly lost: number;
  readonly firstLoss: string | undefined;
}

export type SocketHolderProtocol = {
  open: {
    request: { targets: readonly SocketTarget[]; concurrency: number };
    result: { opened: number; failed: number; firstFailure: string | undefined; dropped: number; firstDrop: string | undefined; ms: number };
  };
  status: { request: null; result: HolderStatus };
  close: { request: null; result: { closed: number } };
};

const held = new Set<WebSocket>();
let closing = false;
let lost = 0;
let firstLoss: string | undefined;

async function open(targets: readonly SocketTarget[], concurrency: number): Promise<SocketHolderProtocol['open']['result']> {
  const started = performance.now();
  const result = await openHeld(targets, 'ready', concurrency);
  const ms = performance.now() - started;
  for (const ws of result.sockets) {
    if (!ws) continue;
    held.add(ws);
    ws.once('close', (code, reason) => {
      held.delete(ws);
      if (closing) return;
      lost++;
      firstLoss ??= `${code} ${reason.toString()}`;
    });
  }
  const { opened, failed, firstFailure, dropped, firstDrop } = result;
  return { opened, failed, firstFailure, dropped, firstDrop, ms };
}

async function closeAll(): Promise<{ closed: number }> {
  closing = true;
  const all = [...held];
  // In slices: a few thousand close handshakes at once would only queue behind each other.
  for (let i = 0; i < all.length; i += 1_000) await Promise.all(all.slice(i, i + 1_000).map(closeSocket));
  held.clear();
  return { closed: all.length };
}

serveParent<SocketHolderProtocol>(
  {
    open: ({ targets, concurrency }) => open(targets, concurrency),
    status: async () => ({ open: held.size, lost, firstLoss }),
    close: () => closeAll(),
  },
  null,
  async () => {
    await closeAll();
  },
);
