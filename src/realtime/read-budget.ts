/**
 * How fast a realtime session's socket is read: `perSecond` bytes on average plus a `burst` at once.
 * Beyond it the socket is paused until the budget has refilled, so TCP's flow control keeps the rest
 * in the client: a flood is read at the pace a person's client could send, not as fast as loopback
 * delivers. A frame can only be judged once ws has read all of it, and reading is what a flood of
 * large frames costs: each 64 KiB chunk and each frame is a buffer for the collector, and forty
 * frames of 2.8 MB read at once brought on five full collections in a second beside other tenants'
 * requests (issue 32). Counted at the socket, so what ws reads and discards after failing a
 * connection (it reads on until the client's close frame, 1009 included) is held to it too.
 */
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { BudgetFigures } from '../lib/budget.js';

/** Reads `socket` (the one `ws` runs on) within `figures`; `onPaused` is told each pause's length. */
export function throttleReads(ws: WebSocket, socket: Duplex, figures: BudgetFigures, onPaused?: (ms: number) => void): void {
  let available = figures.burst;
  let last = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const refill = () => {
    const now = performance.now();
    available = Math.min(figures.burst, available + ((now - last) * figures.perSecond) / 1000);
    last = now;
  };
  const wait = () => {
    const ms = Math.ceil((-available * 1000) / figures.perSecond);
    onPaused?.(ms);
    timer = setTimeout(resume, ms);
  };
  const resume = () => {
    timer = undefined;
    refill();
    if (available < 0) wait();
    else ws.resume();
  };
  socket.on('data', (chunk: Buffer) => {
    refill();
    available -= chunk.length;
    if (available >= 0) return;
    // ws resumes the socket itself after failing a connection: pause again whenever in debt.
    ws.pause();
    if (!timer) wait();
  });
  socket.once('close', () => clearTimeout(timer));
}
