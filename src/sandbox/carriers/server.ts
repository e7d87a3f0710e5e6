/**
 * The sandbox carriers: in-process simulators of both telephony providers on one local HTTP server.
 * The service's real carrier adapters talk to them over the real wire protocols; only base URLs and
 * credentials differ from production. provider_a (Twilio-compatible) lives under `${url}/provider_a`
 * (the adapter appends `/2010-04-01/...`), provider_b (Telnyx Call Control v2-compatible) under
 * `${url}/provider_b/v2` (the adapter appends `/calls`...). With `sip`, a SIP far end (sip.ts) at
 * `sip.host:sip.port` plays the phone network behind a SIP trunk by the same numbers and callees.
 *
 * Outcome of an outbound call, by the last four digits of `to` (fixed: clients depend on them):
 *   0001  voicemail: a machine answers after ringMs, plays its greeting (6.8 s) and a beep (0.5 s),
 *         records the agent audio that plays after the beep (`agentAudioAfterBeepMs`) and hangs up
 *         1.5 s after the agent went quiet (30 s at most). AMD says machine: provider_a Enable ->
 *         `machine_start` 1 s after answer, DetectMessageEnd -> `machine_end_beep` right after the beep
 *         (`unknown` if MachineDetectionTimeout comes first); provider_b `call.machine.detection.ended`
 *         machine 1 s in, and with detect_beep/premium/greeting_end `call.machine.greeting.ended`
 *         beep_detected after the beep.
 *   0002  busy: rings ringMs, then busy (provider_a CallStatus busy; provider_b hangup_cause user_busy).
 *   0003  no answer: rings until min(Timeout / timeout_secs, noAnswerMs), then no-answer
 *         (provider_b hangup_cause timeout).
 *   0004  refused at the dial request: provider_a 400 code 21211, provider_b 422 code 10016 (pointer
 *         /to). The number also does not exist for the phone-number lookups. The attempt is recorded
 *         (outcome failed).
 *   0005  a phone menu answers after ringMs (AMD, if asked, says human): once the agent's first words
 *         are over it says "Welcome to Acme Dental. To reach the front desk, press 1 then #." and
 *         waits 8 s for keys ending in `#`. `1#`: "Connecting you to the front desk.", and a person
 *         takes the line (the test's script, else: wait for the agent, "Front desk, this is Sam
 *         speaking.", wait, "Thanks, goodbye.", wait up to 2 s, hang up). Other keys or none:
 *         "Sorry, that is not a valid option." and the prompt again; after the third try "Goodbye."
 *         and it hangs up, never having answered as a person. The menu hears keys the way the
 *         carrier carries them: provider_b `send_dtmf`, sip RFC 4733 events, or tones in the agent
 *         audio (provider_a).
 *   0007  a person who does not want calls answers after ringMs (AMD, if asked, says human): waits
 *         for the agent's first words, says "Please do not call me again.", waits for the reply (the
 *         agent's confirmation and goodbye, when it offers the opt-out tool), waits up to 2 s more
 *         and hangs up (the test's script instead, if it set one).
 *   0008  sip only: a person who declines the call: rings ringMs, then 603 Decline (outcome rejected).
 *   other a person answers after ringMs (no-answer instead if the ring timeout is shorter); AMD, if
 *         asked, says human 0.8 s in; the person follows the test's script (setScript) or the default:
 *         wait for the agent's first message to finish, say "Hello, this is Sam.", wait for the
 *         reply, say "Can you tell me about my appointment?", wait, say "Thanks, goodbye.", wait up
 *         to 2 s for the agent to start talking (it may say goodbye and hang up), then hang up.
 *         With 0.6 s agent replies the conversation lasts about 8 s (simulated) after the answer:
 *         about 9.3 s from the dial request at speed 1 with the default ringMs, 2.4 s at speed 4.
 *
 * On sip: busy is 486 after ringing; no answer rings until the service's CANCEL (487), or 480 after
 * noAnswerMs; 0004 is 404 Not Found (outcome failed); the service's CANCEL or BYE is its hang-up.
 * SIP has no answering-machine detection: the machine (0001) just answers. The media is the call's
 * RTP from the answer: the callee's voice is queued on it, and the agent is heard whenever the
 * service's packets are not digital silence.
 *
 * Simulation rules:
 * - Time: every duration is simulated and divided by `speed` (media, waits, ringing, AMD); SIP's media
 *   is RTP in real time, so the SIP far end runs at speed 1.
 * - Dialing: queued, initiated 100 ms later, ringing 200 ms after that, then the outcome.
 * - Media: once a stream is open the carrier sends a 20 ms mu-law frame every 20 ms for the whole
 *   call, silence (0xFF) when the callee is not talking. Agent audio is queued and played in real
 *   (scaled) time; a mark is echoed when playback reaches it (at once when nothing is queued); `clear`
 *   empties the queue and echoes every pending mark. The callee hears the agent as it plays: the agent
 *   finished a turn when it had audio playing and playback has been idle for 400 ms. No agent audio
 *   within 5 s of a wait (counted while a stream is up): the person speaks anyway. Speech is `encodeSpokenText` (the sandbox voice
 *   service decodes it back to text) as mu-law.
 * - provider_a: callbacks are form POSTs signed with the account's latest auth token
 *   (X-Twilio-Signature over the exact URL posted to); status callbacks carry SequenceNumber 0,1,2...;
 *   `completed` is always sent when there is a StatusCallback (CallDuration in simulated seconds).
 *   TwiML: `<Connect><Stream url>` (ws:// accepted; a query string is dropped and noted) with
 *   `<Parameter>`s in customParameters, `<Dial>` (transfer), `<Hangup/>`, `<Reject reason>` (first
 *   verb of an inbound call: busy -> busy, else no-answer), `<Pause>`. The service closing the stream
 *   ends the `<Connect>`; when the TwiML is over the call completes. TwiML that fails to fetch or
 *   parse: the call ends failed. Synchronous AMD (no AsyncAmd) delays the voice request until the
 *   result and adds AnsweredBy to it.
 * - provider_b: webhooks are JSON POSTs signed with the sandbox's Ed25519 key, delivered one at a time
 *   per call in order; client_state (set when dialing, answering, or on any action) is echoed in every
 *   payload. Streaming starts at answer when stream_url was given; agent audio is played only on a
 *   bidirectional stream (stream_bidirectional_mode rtp, codec PCMU). The service closing the stream:
 *   `streaming.stopped`, and the call is hung up 1 s later (normal_clearing). A repeated command_id
 *   is a no-op (a dial returns the same call); an action on an ended call is 422 code 90018, on a call
 *   in the wrong state 422 code 90034. call.hangup's hangup_source is caller/callee from the call's
 *   view (the service is the caller of outgoing calls), unknown when the carrier ended it.
 * - Keys: the callee's keys go to the service as `dtmf` frames on the stream (and provider_b's
 *   `call.dtmf.received` webhook), on sip as RFC 4733 events (which it hears from the service too). The service's keys reach the callee by provider_b's `send_dtmf`
 *   action (digits 0-9 A-D * # and pauses w 0.5 s, W 1 s; duration_millis 100-500, default 250; each
 *   key heard after its duration, 100 ms apart; on an unanswered call 422 code 90034), or as DTMF
 *   tones in the agent audio the callee hears (either carrier: provider_a's stream takes no key
 *   frames, so a `dtmf` frame from the service is a protocol error). The record's `dtmfReceived`
 *   holds what the callee heard, `dtmfSent` what it pressed.
 * - Transfer (provider_a `<Dial>` TwiML update, provider_b `transfer`, sip REFER: 202, then a NOTIFY of
 *   the target's 200): the stream stops (`stop`, socket closed), `transferredTo` is recorded, and the
 *   call completes 1 s later.
 * - Time limits: TimeLimit / time_limit_secs (default 4 h) from the answer; the carrier hangs up
 *   (provider_b hangup_cause time_limit).
 * - Inbound (`ring()`): provider_a posts the number's VoiceUrl (CallStatus ringing, Direction inbound);
 *   provider_b sends `call.initiated` (incoming, parked) to the webhook_event_url of the connection
 *   the number is attached to and waits for `answer`, `reject` or `hangup`; sip sends an INVITE to
 *   the service's SIP port from the far end's address. Unanswered for 30 s, the
 *   caller gives up. The caller is the default person unless a script is given, or the PIN caller
 *   when `from` ends in 0006: it waits for the agent's first words, says "I would like to check my
 *   account.", waits for the reply, types 1234# (200 ms apart), waits for the reply, says "Thanks,
 *   goodbye.", waits up to 2 s and hangs up.
 * - setCallbacksEnabled(false): no status, AMD or webhook requests (provider_a still requests TwiML
 *   from the voice URL, so media flows); a call can still be read (provider_a `GET .../Calls/{sid}.json`,
 *   provider_b `GET /calls/{id}`).
 * - What the real carrier would refuse or ignore (extra fields in frames, a Stream url with a query,
 *   unsupported TwiML verbs...) is listed in the record's `protocolErrors`; a frame that cannot be used
 *   at all is dropped (provider_b also answers it with an `error` event).
 * - Credentials are checked for shape only and never logged.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import { newWebhookKey, webhookKeyFromSeed } from './signing.js';
import type { SimCall } from './call.js';
import type { CalleeScript } from './callee.js';
import { Clock } from './clock.js';
import type { CarrierContext, RingInput } from './carrier.js';
import { BodyTooLarge, sendJson } from './http.js';
import { CallRecords, type SandboxCallRecord, type SandboxProvider } from './records.js';
import { SIMULATORS, type SimulatorContext } from './simulators.js';
import type { CarrierSettings } from '../../carriers/index.js';
import { startSipFarEnd, type SipFarEndOptions } from './sip.js';

export type { CalleeScript, CalleeStep } from './callee.js';
export { DEFAULT_PERSON } from './callee.js';
export type { CallbackRecord, CallOutcome, CallState, HangupBy, SandboxCallRecord, SandboxProvider } from './records.js';

export interface SandboxCarrierOptions {
  host?: string;
  port?: number;
  /** Time scale: 1 = real time; 4 = media paced 4x faster and every wait 4x shorter. */
  speed?: number;
  /** Ringing time before a call is answered / found busy (default 1000 ms, scaled by speed). */
  ringMs?: number;
  /** Cap on the no-answer wait (default: the dial request's Timeout / timeout_secs). */
  noAnswerMs?: number;
  /** 32-byte seed of the provider_b Ed25519 signing key (default: random per start). */
  signingSeed?: Buffer;
  /** Start the SIP far end too, for a trunk to point at (and to ring the service through its SIP port). */
  sip?: SipFarEndOptions;
  log?: Logger;
}

export interface SandboxCarriers {
  readonly url: string;
  readonly providerAUrl: string;
  readonly providerBUrl: string;
  /** base64 of the raw 32-byte Ed25519 public key that signs every provider_b webhook. */
  readonly providerBPublicKey: string;
  /** The plug-in options that point `provider`'s adapter at its simulator here (its API URL, and what else it needs). */
  pluginOptions(provider: SandboxProvider): NonNullable<CarrierSettings[SandboxProvider]>;
  /** The SIP far end, when started: a SIP trunk's outbound host (`host:port`) and its inbound source. */
  readonly sip: { host: string; port: number } | null;
  /** Every simulated call so far (both providers), oldest first; the last 1000 are kept. */
  calls(): SandboxCallRecord[];
  call(callSid: string): SandboxCallRecord | undefined;
  /** Resolves with the first call record (now or later) matching pred; rejects after timeoutMs. */
  waitForCall(pred: (c: SandboxCallRecord) => boolean, timeoutMs?: number): Promise<SandboxCallRecord>;
  /** Rings a number configured for inbound as if a person called it; resolves once the service answered the carrier's first request. */
  ring(input: RingInput): Promise<{ callSid: string }>;
  /** The next outbound calls to `toNumber` follow this script instead of the default person (until cleared with null). */
  setScript(toNumber: string, script: CalleeScript | null): void;
  /** false: the carrier stops sending every callback/webhook (a carrier that never calls back); media still flows. */
  setCallbacksEnabled(enabled: boolean): void;
  /** provider_b only: deliver media frames slightly out of order (swap some adjacent frames), as the real carrier may. */
  setReorderMedia(enabled: boolean): void;
  close(): Promise<void>;
}

const DEFAULT_WAIT_MS = 10_000;

export async function startSandboxCarriers(options: SandboxCarrierOptions = {}): Promise<SandboxCarriers> {
  const log = (options.log ?? pino({ level: 'silent' })).child({ component: 'sandbox-carriers' });
  const clock = new Clock(options.speed ?? 1);
  const records = new CallRecords();
  const scripts = new Map<string, CalleeScript>();
  const live = new Set<SimCall>();
  const shutdown = new AbortController();
  let callbacksEnabled = true;
  let reorderMedia = false;
  const keys = options.signingSeed ? webhookKeyFromSeed(options.signingSeed) : newWebhookKey();

  const ctx: CarrierContext = {
    clock,
    log,
    records,
    ringMs: options.ringMs ?? 1000,
    noAnswerMs: options.noAnswerMs ?? null,
    reorderMedia: () => reorderMedia,
    callbacksEnabled: () => callbacksEnabled,
    scriptFor: (to) => scripts.get(to) ?? null,
    shutdown: shutdown.signal,
    track: (call) => void live.add(call),
    finished: (call) => void live.delete(call),
  };
  const simulatorCtx: SimulatorContext = { carrier: ctx, webhookKey: keys };
  const simulators = SIMULATORS.map((entry) => ({ entry, sim: entry.create(simulatorCtx) }));
  const simulatorOf = (provider: SandboxProvider) => {
    const found = simulators.find((s) => s.entry.provider === provider);
    if (!found) throw new Error(`the sandbox simulates no carrier ${provider}`);
    return found;
  };
  const sip = options.sip ? await startSipFarEnd(ctx, options.sip) : null;
  const providers = [...simulators.map((s) => s.entry.provider), ...(sip ? ['sip'] : [])];

  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://sandbox');
    const path = u.pathname;
    log.debug({ method: req.method, path }, 'sandbox carrier request');
    const target = simulators.find((s) => path.startsWith(`${s.entry.path}/`));
    if (!target) {
      if (path === '/' || path === '/health') sendJson(res, 200, { ok: true, providers });
      else sendJson(res, 404, { error: 'not_found', detail: `sandbox carriers serve ${simulators.map((s) => `${s.entry.path}/...`).join(' and ')}` });
      return;
    }
    target.sim.handle(req, res, path.slice(target.entry.path.length), u.searchParams).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof BodyTooLarge) return sendJson(res, 413, { error: 'body_too_large' });
      log.error({ err, path }, 'sandbox carrier request failed');
      sendJson(res, 500, { error: 'internal_error' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
  log.info({ url, speed: clock.speed }, 'sandbox carriers listening');

  return {
    url,
    providerAUrl: `${url}${simulatorOf('provider_a').entry.path}`,
    providerBUrl: `${url}${simulatorOf('provider_b').entry.path}`,
    providerBPublicKey: keys.publicKeyBase64,
    pluginOptions: (provider) => {
      const { entry } = simulatorOf(provider);
      return entry.pluginOptions(`${url}${entry.path}`, simulatorCtx);
    },
    sip: sip && { host: sip.host, port: sip.port },
    calls: () => records.all(),
    call: (callSid) => records.get(callSid),
    waitForCall: (pred, timeoutMs = DEFAULT_WAIT_MS) => records.wait(pred, timeoutMs),
    ring: (input) => {
      // The SIP far end is no HTTP simulator (simulators.ts): it rings the service's SIP port.
      if (input.provider === 'sip') return sip ? sip.ring(input) : Promise.reject(new Error('sip: the SIP far end is not running'));
      return simulatorOf(input.provider).sim.ring(input);
    },
    setScript: (toNumber, script) => {
      if (script) scripts.set(toNumber, script);
      else scripts.delete(toNumber);
    },
    setCallbacksEnabled: (enabled) => {
      callbacksEnabled = enabled;
    },
    setReorderMedia: (enabled) => {
      reorderMedia = enabled;
    },
    close: async () => {
      shutdown.abort();
      for (const call of live) call.shutdown();
      live.clear();
      clock.stop();
      for (const s of simulators) s.sim.shutdown();
      await sip?.shutdown();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
