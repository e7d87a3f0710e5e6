/**
 * The far end's ear in the SIP benchmark (scripts/bench/sip.ts), a process of its own: one UDP socket
 * per call at the port sipp's offer names for it (`[auto_media_port+4]`: base + 4n for call n, sipp's
 * `-mp` being the base), so the service's RTP for each call arrives here, while sipp plays the caller's
 * speech from those same addresses (pcap play on a raw socket writes the call's port as the source,
 * so the service's symmetric RTP takes it). sipp itself keeps no arrival times.
 *
 * Each audio packet's arrival is stamped when its 'message' callback runs, with its RTP timestamp, and
 * compared with its schedule: the stream's RTP clock (8 kHz), anchored at the stream's earliest
 * packet in the window. Lateness is each packet's distance behind that schedule; the interval error is
 * how far the gap between two packets in a row is from the 20 ms (or whatever) their timestamps say.
 * A stamp is late by as much as this process's own event loop was; its delay p99 is reported beside.
 *
 * IPC: {cmd: 'open', n} binds n sockets (base and base + 2 left free for sipp's own media sockets)
 * and answers {opened: base}; {cmd: 'reset'} clears the figures ({reset: true}); {cmd: 'stats'}
 * answers {rtp: RtpFigures}; {cmd: 'close'} closes the sockets ({closed: true}).
 */
import dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';

export interface RtpFigures {
  streams: number;
  packets: number;
  /** Packets missing by sequence number. */
  lost: number;
  wallMs: number;
  lateP50Ms: number;
  lateP99Ms: number;
  lateMaxMs: number;
  intervalErrorP99Ms: number;
  /** This process's own event-loop delay p99: how late a stamp may be for its own sake. */
  receiverLoopP99Ms: number;
}

interface Stream {
  at: number[];
  /** RTP timestamps, in samples. */
  ts: number[];
  lastSeq: number;
}

const AUDIO_TYPES = new Set([0, 8]); // PCMU, PCMA
const SAMPLES_PER_MS = 8;

let sockets: dgram.Socket[] = [];
let streams: Stream[] = [];
let lost = 0;
let since = performance.now();
const loop = monitorEventLoopDelay({ resolution: 1 });
loop.enable();

const bind = (port: number) =>
  new Promise<dgram.Socket | null>((resolve) => {
    const s = dgram.createSocket('udp4');
    s.once('error', () => s.close(() => resolve(null)));
    s.bind(port, '127.0.0.1', () => resolve(s));
  });

async function close(): Promise<void> {
  await Promise.all(sockets.map((s) => new Promise<void>((r) => s.close(() => r()))));
  sockets = [];
  streams = [];
}

function reset(): void {
  for (const s of streams) {
    s.at = [];
    s.ts = [];
    s.lastSeq = -1;
  }
  lost = 0;
  since = performance.now();
  loop.reset();
}

function listen(socket: dgram.Socket, stream: Stream): void {
  socket.on('message', (buf) => {
    const at = performance.now();
    if (buf.length < 12 || buf[0] >> 6 !== 2 || !AUDIO_TYPES.has(buf[1] & 0x7f)) return;
    const seq = buf.readUInt16BE(2);
    if (stream.lastSeq >= 0) {
      const gap = (seq - stream.lastSeq - 1) & 0xffff;
      if (gap < 1000) lost += gap;
    }
    stream.lastSeq = seq;
    stream.at.push(at);
    stream.ts.push(buf.readUInt32BE(4));
  });
}

/** Binds base + 4k for k = 1..n, with base and base + 2 free for sipp; tries other bases when one is taken. */
async function open(n: number): Promise<number> {
  await close();
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 40_000 + 2 * randomInt(Math.max(1, Math.floor((65_535 - 40_000 - 4 * n - 8) / 2)));
    const probe = await Promise.all([bind(base), bind(base + 2)]);
    for (const s of probe) s?.close();
    if (probe.includes(null)) continue;
    const bound = await Promise.all(Array.from({ length: n }, (_, k) => bind(base + 4 * (k + 1))));
    if (bound.includes(null)) {
      await Promise.all(bound.map((s) => s && new Promise<void>((r) => s.close(() => r()))));
      continue;
    }
    sockets = bound as dgram.Socket[];
    streams = sockets.map((socket) => {
      const stream: Stream = { at: [], ts: [], lastSeq: -1 };
      listen(socket, stream);
      return stream;
    });
    reset();
    return base;
  }
  throw new Error(`no free run of ${n} UDP ports for the receiver`);
}

function figures(): RtpFigures {
  const late: number[] = [];
  const interval: number[] = [];
  for (const s of streams) {
    if (s.at.length < 2) continue;
    const t0 = s.ts[0];
    // Milliseconds since the stream's first packet by its RTP clock (unsigned: the timestamp wraps).
    const due = s.ts.map((ts) => ((ts - t0) >>> 0) / SAMPLES_PER_MS);
    let anchor = Infinity;
    for (let k = 0; k < s.at.length; k++) anchor = Math.min(anchor, s.at[k] - due[k]);
    for (let k = 0; k < s.at.length; k++) {
      late.push(s.at[k] - due[k] - anchor);
      if (k > 0) interval.push(Math.abs(s.at[k] - s.at[k - 1] - (due[k] - due[k - 1])));
    }
  }
  late.sort((a, b) => a - b);
  interval.sort((a, b) => a - b);
  const at = (xs: number[], p: number) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(p * xs.length))] : NaN);
  return {
    streams: streams.filter((s) => s.at.length > 0).length,
    packets: late.length,
    lost,
    wallMs: performance.now() - since,
    lateP50Ms: at(late, 0.5),
    lateP99Ms: at(late, 0.99),
    lateMaxMs: late.at(-1) ?? NaN,
    intervalErrorP99Ms: at(interval, 0.99),
    receiverLoopP99Ms: loop.percentile(99) / 1e6,
  };
}

process.on('disconnect', () => process.exit(0));
process.on('message', (m: { cmd: string; n?: number }) => {
  const reply = (msg: Record<string, unknown>) => process.send!(msg);
  if (m.cmd === 'open')
    void open(m.n ?? 1).then(
      (base) => reply({ opened: base }),
      (err: Error) => reply({ opened: -1, error: err.message }),
    );
  else if (m.cmd === 'reset') {
    reset();
    reply({ reset: true });
  } else if (m.cmd === 'stats') reply({ rtp: figures() });
  else if (m.cmd === 'close') void close().then(() => reply({ closed: true }));
});
process.send!({ ready: true });
