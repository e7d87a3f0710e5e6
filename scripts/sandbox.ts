/**
 * The simulators as processes of their own, for instances that share one carrier and one voice service
 * (several instances behind a load balancer in development, the benchmark, the cluster test):
 *
 *   npm run sandbox -- carriers [--port=N] [--speed=S] [--ring-ms=MS] [--host=H] [--signing-seed=HEX64]
 *                              [--sip-port=N] [--sip-service=HOST:PORT] [--sip-transport=udp|tcp]
 *                              [--sip-rtp-ports=MIN-MAX]
 *     prints one JSON line {"url", "providerAUrl", "providerBUrl", "providerBPublicKey", "sipTrunkHost"}
 *     once listening. Point instances at it with PROVIDER_A_API_URL=providerAUrl and
 *     PROVIDER_B_API_URL=providerBUrl; provider_b webhooks are signed with its key, so agents' provider_b
 *     `public_key` must be providerBPublicKey (a fixed --signing-seed keeps it across restarts). The SIP
 *     far end (src/sandbox/carriers/sip.ts) listens at sipTrunkHost (`host:port`, UDP and TCP; a fixed
 *     --sip-port keeps it): a SIP trunk whose `outbound.host` is sipTrunkHost and whose
 *     `inbound.allowed_sources` lists its address reaches the sandbox's callees. Inbound SIP calls (the
 *     `ring` message below) go to --sip-service, the instances' SIP_PORT (default transport udp).
 *   npm run sandbox -- voice [--port=N] [--speed=S] [--host=H]
 *     prints one JSON line {"url"} once listening; point instances at it with VOICE_SERVICE_URL=url.
 *
 * Options may also come from the environment (PORT, HOST, SPEED, RING_MS, NO_ANSWER_MS, SIGNING_SEED,
 * SIP_FAR_END_PORT, SIP_SERVICE, SIP_TRANSPORT, SIP_RTP_PORTS, END_OF_TURN_MS, MS_PER_CHAR, LOG_LEVEL); logs go to stderr. Both stop on SIGTERM or SIGINT. Forked
 * with an IPC channel (the benchmark), `carriers` also sends that object as `{ready: true, ...}` and
 * takes `{cmd: 'script', to, script}` (a CalleeScript for the next calls to `to`), `{cmd: 'calls'}`
 * (answers `{calls: n}`) and `{cmd: 'ring', input}` (an inbound call, as RingInput; answers
 * `{rang: {callSid} | {error}}`).
 */
import pino from 'pino';
import { startSandboxCarriers, startSandboxVoiceService, type CalleeScript } from '../src/sandbox/index.js';
import type { RingInput } from '../src/sandbox/carriers/carrier.js';
import type { SipFarEndOptions } from '../src/sandbox/carriers/sip.js';

const USAGE = 'usage: npm run sandbox -- carriers|voice [--port=N] [--speed=S] [--host=H]';

function option(name: string, env: string): string | undefined {
  const flag = `--${name}=`;
  const arg = process.argv.slice(3).find((a) => a.startsWith(flag));
  return arg ? arg.slice(flag.length) : process.env[env];
}

function number(name: string, env: string): number | undefined {
  const raw = option(name, env);
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${env} / --${name} must be a non-negative number, got ${raw}`);
  return n;
}

const log = pino({ level: option('log-level', 'LOG_LEVEL') ?? 'info' }, pino.destination(2));

/** Prints the ready line and stops `close` on SIGTERM / SIGINT (or when the parent of a fork goes). */
function serve(ready: Record<string, string>, close: () => Promise<void>): void {
  process.stdout.write(`${JSON.stringify(ready)}\n`);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'sandbox did not close cleanly');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}

async function carriers(): Promise<void> {
  const seedHex = option('signing-seed', 'SIGNING_SEED');
  if (seedHex !== undefined && !/^[0-9a-fA-F]{64}$/.test(seedHex)) throw new Error('SIGNING_SEED must be 64 hex digits');
  const host = option('host', 'HOST');
  const sandbox = await startSandboxCarriers({
    host,
    port: number('port', 'PORT') ?? 0,
    speed: number('speed', 'SPEED') || 1,
    ringMs: number('ring-ms', 'RING_MS'),
    noAnswerMs: number('no-answer-ms', 'NO_ANSWER_MS'),
    signingSeed: seedHex ? Buffer.from(seedHex, 'hex') : undefined,
    sip: sipFarEnd(host),
    log,
  });
  const sip = sandbox.sip!;
  const ready = {
    url: sandbox.url,
    providerAUrl: sandbox.providerAUrl,
    providerBUrl: sandbox.providerBUrl,
    providerBPublicKey: sandbox.providerBPublicKey,
    sipTrunkHost: `${sip.host.includes(':') ? `[${sip.host}]` : sip.host}:${sip.port}`,
  };
  if (process.send) {
    process.send({ ready: true, ...ready });
    process.on('message', (m: { cmd?: string; to?: string; script?: CalleeScript | null; input?: RingInput }) => {
      if (m.cmd === 'script' && typeof m.to === 'string') sandbox.setScript(m.to, m.script ?? null);
      if (m.cmd === 'calls') process.send!({ calls: sandbox.calls().length });
      if (m.cmd === 'ring' && m.input)
        sandbox.ring(m.input).then(
          (rang) => process.send!({ rang }),
          (err: Error) => process.send!({ rang: { error: err.message } }),
        );
    });
  }
  serve(ready, () => sandbox.close());
}

/**
 * The SIP far end's options: on the HTTP simulators' address (loopback when that is a wildcard or
 * unset), ringing the service at --sip-service. The RTP range defaults apart from the service's
 * (SIP_RTP_PORT_MIN-MAX, 10000-20000) so both can run on one machine without taking turns at ports.
 */
function sipFarEnd(host: string | undefined): SipFarEndOptions {
  const address = !host || host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const service = option('sip-service', 'SIP_SERVICE');
  const target = service ? /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(service) : null;
  if (service && !target) throw new Error(`SIP_SERVICE / --sip-service must be host:port, got ${service}`);
  const transport = option('sip-transport', 'SIP_TRANSPORT') ?? 'udp';
  if (transport !== 'udp' && transport !== 'tcp') throw new Error(`SIP_TRANSPORT / --sip-transport must be udp or tcp, got ${transport}`);
  const ports = option('sip-rtp-ports', 'SIP_RTP_PORTS') ?? '30000-30998';
  const range = /^(\d{4,5})-(\d{4,5})$/.exec(ports);
  if (!range || Number(range[1]) < 1024 || Number(range[1]) >= Number(range[2]) || Number(range[2]) > 65535)
    throw new Error(`SIP_RTP_PORTS / --sip-rtp-ports must be MIN-MAX (1024-65535), got ${ports}`);
  return {
    host: address,
    port: number('sip-port', 'SIP_FAR_END_PORT') ?? 0,
    service: { host: target?.[1] ?? address, port: target ? Number(target[2]) : 0, transport },
    rtp: { min: Number(range[1]), max: Number(range[2]) },
  };
}

async function voice(): Promise<void> {
  const sandbox = await startSandboxVoiceService({
    host: option('host', 'HOST'),
    port: number('port', 'PORT') ?? 0,
    speed: number('speed', 'SPEED') || 1,
    endOfTurnMs: number('end-of-turn-ms', 'END_OF_TURN_MS'),
    msPerChar: number('ms-per-char', 'MS_PER_CHAR'),
  });
  if (process.send) process.send({ ready: true, url: sandbox.url });
  serve({ url: sandbox.url }, () => sandbox.close());
}

const which = process.argv[2];
if (which === 'carriers') await carriers();
else if (which === 'voice') await voice();
else {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}
