/**
 * The sandbox carriers as their own process (the benchmark and the kill -9/restart test need the carrier
 * to outlive the service). Options from argv (`--port=4010 --speed=4 --ring-ms=200 --host=...`) or the
 * environment (PORT, SPEED, RING_MS, NO_ANSWER_MS, HOST, SIGNING_SEED as 64 hex digits, LOG_LEVEL; logs
 * go to stderr). Prints one JSON line {url, providerAUrl, providerBUrl, providerBPublicKey} on stdout
 * once listening; stops on SIGTERM or SIGINT. Forked with an IPC channel (the benchmark), it also
 * sends that object as `{ready: true, ...}` and takes `{cmd: 'script', to, script}` (CalleeScript for the
 * next calls to `to`) and `{cmd: 'calls'}` (answers `{calls: n}`).
 */
import pino from 'pino';
import { startSandboxCarriers, type CalleeScript } from '../src/sandbox/carriers/server.js';

function option(name: string, env: string): string | undefined {
  const flag = `--${name}=`;
  const arg = process.argv.slice(2).find((a) => a.startsWith(flag));
  return arg ? arg.slice(flag.length) : process.env[env];
}

function number(name: string, env: string): number | undefined {
  const raw = option(name, env);
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${env} / --${name} must be a non-negative number, got ${raw}`);
  return n;
}

const seedHex = option('signing-seed', 'SIGNING_SEED');
if (seedHex !== undefined && !/^[0-9a-fA-F]{64}$/.test(seedHex)) throw new Error('SIGNING_SEED must be 64 hex digits');

const log = pino({ level: option('log-level', 'LOG_LEVEL') ?? 'info' }, pino.destination(2));
const carriers = await startSandboxCarriers({
  host: option('host', 'HOST'),
  port: number('port', 'PORT') ?? 0,
  speed: number('speed', 'SPEED') || 1,
  ringMs: number('ring-ms', 'RING_MS'),
  noAnswerMs: number('no-answer-ms', 'NO_ANSWER_MS'),
  signingSeed: seedHex ? Buffer.from(seedHex, 'hex') : undefined,
  log,
});

process.stdout.write(
  `${JSON.stringify({
    url: carriers.url,
    providerAUrl: carriers.providerAUrl,
    providerBUrl: carriers.providerBUrl,
    providerBPublicKey: carriers.providerBPublicKey,
  })}\n`,
);

if (process.send) {
  process.send({
    ready: true,
    url: carriers.url,
    providerAUrl: carriers.providerAUrl,
    providerBUrl: carriers.providerBUrl,
    providerBPublicKey: carriers.providerBPublicKey,
  });
  process.on('message', (m: { cmd?: string; to?: string; script?: CalleeScript | null }) => {
    if (m.cmd === 'script' && typeof m.to === 'string') carriers.setScript(m.to, m.script ?? null);
    if (m.cmd === 'calls') process.send!({ calls: carriers.calls().length });
  });
  process.on('disconnect', () => stop());
}

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  carriers.close().then(
    () => process.exit(0),
    (err: unknown) => {
      log.error({ err }, 'sandbox carriers did not close cleanly');
      process.exit(1);
    },
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
