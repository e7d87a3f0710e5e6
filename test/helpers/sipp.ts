/**
 * sipp (Debian's sip-tester) as the other side of our SIP user agent, on loopback with free ports:
 * a scenario from test/fixtures/sip/ with its @PLACEHOLDERS@ filled, run once as a caller (-sn-less
 * UAC mode: it sends first) or as a callee (listening until our INVITE), and the user agent the tests
 * run against, with test-sized settings.
 */
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createSipUserAgent, type SipUserAgent, type SipUserAgentOptions } from '../../src/sip/index.js';

const SCENARIOS = path.resolve(import.meta.dirname, '../fixtures/sip');
export const DTMF_PCAPS = '/usr/share/sip-tester';
export const LOOPBACK = '127.0.0.1';

export interface SippResult {
  code: number | null;
  stdout: string;
  /** sipp's own log of unexpected messages, when it wrote one. */
  errors: string;
}

/** A port free for both UDP and TCP on loopback (even, so it suits RTP too); the race with other users is accepted. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + 2 * Math.floor(Math.random() * 15_000);
    const ok = await new Promise<boolean>((resolve) => {
      const u = dgram.createSocket('udp4');
      u.once('error', () => resolve(false));
      u.bind(port, LOOPBACK, () => {
        const t = net.createServer();
        t.once('error', () => u.close(() => resolve(false)));
        t.listen(port, LOOPBACK, () => t.close(() => u.close(() => resolve(true))));
      });
    });
    if (ok) return port;
  }
}

/** Copy a scenario into a temporary directory with its placeholders filled. */
export function scenario(name: string, vars: Record<string, string> = {}): { dir: string; file: string } {
  let text = fs.readFileSync(path.join(SCENARIOS, name), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`@${k}@`, v);
  const left = /@[A-Z_]+@/.exec(text);
  if (left) throw new Error(`scenario ${name}: ${left[0]} not filled`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sipp-'));
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return { dir, file };
}

export interface SippRun {
  /** sipp's SIP port and RTP port. */
  port: number;
  mediaPort: number;
  done: Promise<SippResult>;
  kill(): void;
}

/**
 * Start sipp with a scenario. `target` (host:port) makes it a caller; without one it waits as a callee.
 * `tcp` runs it over TCP (one connection).
 */
export async function startSipp(o: {
  name: string;
  vars?: Record<string, string>;
  target?: string;
  service?: string;
  tcp?: boolean;
  args?: string[];
  timeoutS?: number;
}): Promise<SippRun> {
  const { dir, file } = scenario(o.name, o.vars);
  const port = await freePort();
  const mediaPort = await freePort();
  const args = [
    ...(o.target ? [o.target] : []),
    '-sf',
    file,
    '-m',
    '1',
    '-l',
    '1',
    '-i',
    LOOPBACK,
    '-p',
    String(port),
    '-mi',
    LOOPBACK,
    '-mp',
    String(mediaPort),
    '-s',
    o.service ?? 'agent',
    '-t',
    o.tcp ? 't1' : 'u1',
    '-nostdin',
    '-timeout',
    `${o.timeoutS ?? 60}s`,
    '-timeout_error',
    '-trace_err',
    ...(o.args ?? []),
  ];
  const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stdout += d.toString()));
  const done = new Promise<SippResult>((resolve) => {
    child.on('close', (code) => {
      const errLog = fs.readdirSync(dir).find((f) => f.endsWith('_errors.log'));
      const errors = errLog ? fs.readFileSync(path.join(dir, errLog), 'utf8') : '';
      fs.rmSync(dir, { recursive: true, force: true });
      resolve({ code, stdout: stdout.slice(-4000), errors: errors.slice(-4000) });
    });
  });
  if (!o.target) {
    let exited = false;
    void done.then(() => (exited = true));
    await waitListening(port, o.tcp ?? false, () => exited);
    if (exited) throw new Error(`sipp exited before listening:\n${(await done).stdout}`);
  }
  return { port, mediaPort, done, kill: () => child.kill('SIGKILL') };
}

/** Wait until sipp has bound its port (a bind of ours fails). */
async function waitListening(port: number, tcp: boolean, exited: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !exited(); i++) {
    const busy = await new Promise<boolean>((resolve) => {
      if (tcp) {
        const s = net.connect(port, LOOPBACK);
        s.once('connect', () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
        return;
      }
      const u = dgram.createSocket('udp4');
      u.once('error', () => resolve(true));
      u.bind(port, LOOPBACK, () => u.close(() => resolve(false)));
    });
    if (busy) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (exited()) return;
  throw new Error(`sipp did not bind port ${port}`);
}

/** A user agent on loopback with a free port and a small RTP range of its own. */
export async function testUserAgent(overrides: Partial<SipUserAgentOptions> = {}): Promise<SipUserAgent> {
  const rtpBase = await freePort();
  const quiet = () => undefined;
  return createSipUserAgent({
    host: LOOPBACK,
    port: 0,
    advertisedAddress: LOOPBACK,
    transports: ['udp', 'tcp'],
    verifyTlsPeers: false,
    rtp: { min: rtpBase, max: rtpBase + 40 },
    timers: { t1: 500, t2: 4000, t4: 5000 },
    nonceTtlMs: 30_000,
    refusalsPerMinute: 50,
    jitterDepth: 3,
    sessionExpiresS: 1800,
    minSessionExpiresS: 90,
    idleConnectionMs: 60_000,
    maxConnections: 100,
    authenticateInbound: () => ({ action: 'allow' }),
    log: { info: quiet, warn: quiet, debug: quiet },
    ...overrides,
  });
}
