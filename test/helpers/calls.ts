/**
 * Phone call test steps: agents with well-formed sandbox credentials for either provider (or a SIP
 * trunk to the sandbox's SIP far end), placing calls through the API, and waiting for a call to reach
 * a state (every answer is checked against the contract by the service's response check).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { TestService } from './service.js';
import type { Tenant } from './fixtures.js';
import { bearer, waitWhileMoving } from './realtime.js';
import { SIMULATORS } from '../../src/sandbox/carriers/simulators.js';
import type { Provider as CarrierProvider } from '../../src/carriers/index.js';

/** The carriers with a sandbox simulator (every registered one but sip). */
export type Provider = Exclude<CarrierProvider, 'sip'>;

/** Timings that make a sandbox call last a second or two instead of ten. */
export const FAST_CALLS: Record<string, string> = {
  SANDBOX_CARRIERS_SPEED: '4',
  // The sandbox carriers send media 4 times faster than real time: the audio budget follows (a carrier by URL is not assumed sped up).
  CALL_AUDIO_RATE: '4',
  SANDBOX_CARRIERS_RING_MS: '40',
  VOICE_SANDBOX_SPEED: '4',
  VOICE_SANDBOX_MS_PER_CHAR: '30',
  VOICE_SANDBOX_END_OF_TURN_MS: '500',
  CALL_RING_TIMEOUT_S: '5',
  JOBS_POLL_INTERVAL_MS: '200',
};

const hex = (n: number) => randomBytes(n).toString('hex');

const handedOut = new Set<string>();

/**
 * A number of the sandbox whose last four digits pick its outcome (see src/sandbox/carriers/server.ts):
 * a valid San Francisco number (exchanges 200-999; the destination policy refuses 1xx, which no
 * numbering plan has).
 */
export function sandboxNumber(suffix = `${Math.floor(Math.random() * 8000) + 1000}`): string {
  // Never twice in one test process: a number enabled for inbound calls is taken for every workspace,
  // and 800 exchanges make a repeat likely within a file that enables a dozen numbers with one suffix.
  for (;;) {
    const number = `+1415${String(Math.floor(Math.random() * 800) + 200)}${suffix}`;
    if (!handedOut.has(number)) {
      handedOut.add(number);
      return number;
    }
  }
}

/** Well-formed sandbox credentials of `provider` for an agent (its simulator's, src/sandbox/carriers/simulators.ts). */
export function providerConfig(provider: Provider, phoneNumber = sandboxNumber('5000')): Record<string, unknown> {
  const simulator = SIMULATORS.find((s) => s.provider === provider);
  if (!simulator) throw new Error(`no sandbox simulator of ${provider}`);
  return simulator.agentConfig(phoneNumber);
}

/** A provider_b config whose `public_key` is the given carrier's (events from a carrier configured by URL are verified with it). */
export function providerBConfigFor(publicKey: string, phoneNumber = '+14155550101'): Record<string, unknown> {
  return { provider_b_config: { api_key: `KEY${hex(12)}`, connection_id: '123456', phone_number: phoneNumber, public_key: publicKey } };
}

/**
 * provider sip's account for an agent: a SIP trunk of its own whose termination is the sandbox's SIP
 * far end, delivering `phoneNumber` from it (the service runs SIP: SIP_PORT is set).
 */
export async function sipConfig(t: TestService, tenant: Tenant, phoneNumber = sandboxNumber('5000')): Promise<Record<string, unknown>> {
  const far = t.service.sandbox.carriers?.server.sip;
  assert.ok(far, 'the sandbox runs its SIP far end (SIP_PORT is set)');
  const trunk = await t.http
    .post('/api/v1/sip-trunks')
    .set(bearer(tenant.apiKey))
    .send({
      name: `Sandbox ${phoneNumber}`,
      inbound: { allowed_sources: [far.host], numbers: [phoneNumber] },
      outbound: { host: `${far.host.includes(':') ? `[${far.host}]` : far.host}:${far.port}`, transport: 'udp' },
    });
  assert.equal(trunk.status, 201, JSON.stringify(trunk.body));
  return { sip_config: { trunk_id: trunk.body.trunk_id, phone_number: phoneNumber } };
}

/** A phone agent; provider sip's account (sipConfig) comes in `body`. */
export async function createPhoneAgent(t: TestService, tenant: Tenant, provider: Provider | 'sip', body: Record<string, unknown> = {}): Promise<string> {
  const res = await t.http
    .post('/api/v1/agents')
    .set(bearer(tenant.apiKey))
    .send({
      name: 'Receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      can_end_conversation: true,
      ...(provider === 'sip' ? {} : providerConfig(provider)),
      ...body,
    });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.agent_id as string;
}

export async function placeCall(t: TestService, tenant: Tenant, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return t.http.post('/api/v1/calls').set(bearer(tenant.apiKey)).set(headers).send(body);
}

export async function getCall(t: TestService, tenant: Tenant, callId: string) {
  const res = await t.http.get(`/api/v1/calls/${callId}`).set(bearer(tenant.apiKey));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as Record<string, any>;
}

const TERMINAL = new Set(['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail']);

/**
 * Polls the call until it is terminal (or `pred` holds); returns it. Gives up after `idleMs` in which
 * neither its status nor its transcript moved (a busy machine slows a conversation down).
 */
export async function waitForCall(
  t: TestService,
  tenant: Tenant,
  callId: string,
  pred: (c: Record<string, any>) => boolean = (c) => TERMINAL.has(c.status),
  idleMs = 20_000,
) {
  return waitWhileMoving(
    async () => {
      const c = await getCall(t, tenant, callId);
      return { done: pred(c) ? c : null, progress: JSON.stringify([c.status, c.transcript?.length ?? 0]) };
    },
    idleMs,
    `call ${callId}`,
  );
}

/** provider_b's `client_state` naming a call, as the service sets it (base64 of its JSON, PROTOCOLS.md). */
export function clientState(callId: string): string {
  return Buffer.from(JSON.stringify({ call_id: callId })).toString('base64');
}
