/**
 * Several instances of the service on one database behind a real load balancer (HAProxy, from Debian's
 * packages), with the simulators as processes of their own (`npm run sandbox -- carriers|voice`), as an
 * operator runs them: PUBLIC_BASE_URL is the balancer, so carriers' callbacks and media streams and
 * browsers' WebSockets all arrive through it at any instance.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startProcess, type ServiceProcess } from './process.js';

const root = path.resolve(import.meta.dirname, '../..');

export const exitCode = (child: ChildProcess) =>
  new Promise<number | null>((r) => (child.exitCode !== null || child.signalCode !== null ? r(child.exitCode) : child.once('exit', r)));

export interface Simulator {
  child: ChildProcess;
  ready: Record<string, string>;
  stop(): Promise<void>;
}

/** `npm run sandbox -- <args>`: resolves with the JSON line it prints once listening. */
export function startSimulator(args: string[]): Promise<Simulator> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/sandbox.ts', ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      if (!out.includes('\n')) return;
      resolve({
        child,
        ready: JSON.parse(out.split('\n')[0]),
        async stop() {
          child.kill('SIGTERM');
          await exitCode(child);
        },
      });
    });
    child.once('exit', (code) => reject(new Error(`sandbox ${args.join(' ')} exited with ${code}: ${err}`)));
  });
}

/** Debian's haproxy, installed by .ci/run; null when this machine has none. */
export function haproxyBinary(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v haproxy || ls /usr/sbin/haproxy 2>/dev/null'], { encoding: 'utf8' }).stdout.trim().split('\n')[0];
  return found || null;
}

export interface Balancer {
  url: string;
  stop(): Promise<void>;
}

/**
 * HAProxy in HTTP mode in front of `ports`, configured as docs/scaling.md recommends: round robin,
 * WebSocket tunnels, X-Forwarded-For (the instances trust it), a server taken out as soon as its
 * readiness answers 503 (draining) or it stops listening, and a request retried on another server
 * when its connection failed, its server closed without answering (killed), or a draining instance
 * refused it with 503 (it did nothing). A slow readiness answer is not a failure (`timeout check`):
 * on a loaded machine a check bounded by its interval (HAProxy's default) marks busy instances down,
 * and the balancer then answers 503 itself (carriers' TwiML fetches and media streams included).
 */
export async function startBalancer(ports: number[], checkMs = 300): Promise<Balancer> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-lb-'));
  const config = [
    'global',
    '  maxconn 4000',
    'defaults',
    '  mode http',
    '  option forwardfor',
    '  timeout connect 2s',
    '  timeout client 120s',
    '  timeout server 120s',
    '  timeout tunnel 600s',
    '  timeout check 5s',
    '  retries 3',
    '  option redispatch 1',
    '  retry-on conn-failure empty-response 503',
    'frontend api',
    `  bind 127.0.0.1:${port}`,
    '  default_backend instances',
    'backend instances',
    '  balance roundrobin',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    `  default-server inter ${checkMs}ms fastinter ${checkMs}ms downinter ${checkMs}ms fall 1 rise 1`,
    ...ports.map((p, i) => `  server i${i + 1} 127.0.0.1:${p} check`),
    '',
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), config);
  const binary = haproxyBinary();
  if (!binary) throw new Error('haproxy is not installed (apt-get install haproxy)');
  const child = spawn(binary, ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${out}`);
    const up = await fetch(`${url}/healthz`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (i > 200) throw new Error(`haproxy did not listen: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await exitCode(child);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One instance of the service, restartable on its port. */
export class Instance {
  process: ServiceProcess | undefined;
  starts = 0;

  constructor(
    readonly name: string,
    readonly port: number,
    private readonly env: Record<string, string>,
    /** Where each run's output is written when it stops (`<name>-<run>.log`). */
    private readonly logDir?: string,
  ) {}

  async start(): Promise<void> {
    this.starts += 1;
    this.process = await startProcess({ ...this.env, PORT: String(this.port) });
  }

  /** Stops the process with `signal` and resolves with its exit code (a SIGKILLed one: null). */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const p = this.process;
    this.process = undefined;
    if (!p) return null;
    const code = await p.stop(signal);
    if (this.logDir) fs.writeFileSync(path.join(this.logDir, `${this.name}-${this.starts}.log`), p.output());
    return code;
  }

  output(): string {
    return this.process?.output() ?? '';
  }
}
