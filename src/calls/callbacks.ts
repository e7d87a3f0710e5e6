/**
 * What the carriers tell us, verified and applied: provider_a's voice webhook (answer a call with our
 * media stream, inbound or outbound), its progress and answering-machine callbacks, and provider_b's
 * Call Control events. Each request is authenticated by the carrier's signature with the credentials of
 * the agent the call belongs to (provider_a: HMAC-SHA1 with the auth token over the URL as called and
 * the form parameters; provider_b: Ed25519 with the account's public key, 300 s window) before it
 * changes anything; a failed check is refused with 403 and logged without secrets.
 *
 * Effects go through the call record (guarded moves of its status, see src/calls/lifecycle.ts); the
 * bridge running the call's media, wherever it is, hears of answering-machine results and of the
 * carrier's end of the call through CallSignals; a call with no live media is finalised here.
 */
import { randomBytes, type KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { conflict, forbidden } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { sha256Hex } from '../lib/tokens.js';
import type { RuntimeAgent } from '../agents/service.js';
import type { CallService } from './service.js';
import { FINALISE_CLAIM_STALE_MS, type CallFinaliser } from './finaliser.js';
import { movableFrom } from './lifecycle.js';
import { newStreamToken } from './stream-token.js';
import { carrierAgentId, isTerminal, type CallIdentity, type CallKey, type CallRow, type CallStore, type CallValues, type CarrierOutcome } from './store.js';
import type { CallbackUrls, Provider } from '../carriers/carrier.js';
import { credentialsOf } from '../carriers/credentials.js';
import { verifyProviderASignature, type FormParams } from '../carriers/provider-a/signature.js';
import { providerAAnsweredBy, providerAStatus } from '../carriers/provider-a/status.js';
import { hangupTwiml, rejectTwiml, streamTwiml } from '../carriers/provider-a/twiml.js';
import { decodeClientState, type ProviderBCarrier } from '../carriers/provider-b/rest.js';
import { publicKeyFromBase64, SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyProviderBSignature } from '../carriers/provider-b/signature.js';
import { providerBAnsweredBy, providerBHangup } from '../carriers/provider-b/status.js';
import type { CallSignals } from './live/signals.js';

const CALL_ID = /^call_[0-9A-Z]{26}$/;
/** The key an unknown call's or number's request is checked against (it never verifies). */
const UNKNOWN_KEY = randomBytes(32).toString('hex');

export interface InboundAgents {
  findForRuntime(workspaceId: string, agentId: string): Promise<RuntimeAgent | null>;
  /** The agent answering inbound calls to `phoneNumber` at `provider`, if any. */
  inboundAgent(provider: Provider, phoneNumber: string): Promise<RuntimeAgent | null>;
}

export interface CallbackOptions {
  orphanAfterMs: number;
  statusGraceMs: number;
  /** provider_b webhooks are verified with this key instead of the agent's (the sandbox carrier's own key). */
  providerBKeyOverride: string | null;
}

const invalidSignature = () => forbidden('invalid_signature', 'The request signature is missing or wrong.');
/** One stream per call: once its media has started, the voice webhook gives no token again (a replay gets this). */
const streamConnected = () => conflict('call_stream_connected', 'The call already has its media stream.');

/** A carrier's request as its signature covers it. */
export interface CarrierRequest {
  /** Path and query as called. */
  url: string;
  /** Our `call_id` query parameter, when the callback URL carries one. */
  callId: string | undefined;
  /** The body exactly as received. */
  rawBody: string;
  header(name: string): string | undefined;
  /** Its signature verified: it comes from the carrier (its connection stops counting as a browser's). */
  verified(): void;
}

/** Form parameters as sent, repeated names kept in order (not qs's nested objects). */
export function formParams(raw: string): FormParams {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(raw)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

const one = (p: FormParams, name: string): string => {
  const v = p[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
};

export class CarrierCallbacks {
  constructor(
    private readonly store: CallStore,
    private readonly agents: InboundAgents,
    private readonly calls: CallService,
    private readonly finaliser: CallFinaliser,
    private readonly signals: CallSignals,
    private readonly providerB: ProviderBCarrier,
    private readonly urls: CallbackUrls,
    private readonly clock: Clock,
    private readonly opts: CallbackOptions,
    private readonly log: Logger,
  ) {}

  // provider_a

  private agentOf(call: Pick<CallRow, 'workspace_id' | 'agent_id' | 'number_agent_id'>): Promise<RuntimeAgent | null> {
    return this.agents.findForRuntime(call.workspace_id, carrierAgentId(call));
  }

  /**
   * Checks `X-Twilio-Signature` with the agent's provider_a token; the account must be the agent's.
   * With no agent (no such call, no agent on the number) the same check runs against a throwaway key
   * and fails the same way: an unsigned request learns nothing about which calls or numbers exist.
   */
  private verifyA(req: CarrierRequest, agent: RuntimeAgent | null, params: FormParams): void {
    const a = agent?.providerA;
    const token = a?.authToken ?? UNKNOWN_KEY;
    const signed = verifyProviderASignature(token, `${this.urls.base()}${req.url}`, params, req.header('X-Twilio-Signature'));
    const good = Boolean(a?.authToken && a.accountSid === one(params, 'AccountSid')) && signed;
    if (!good) {
      this.log.warn({ path: req.url.split('?')[0], callSid: one(params, 'CallSid').slice(0, 64) }, 'provider_a callback refused: bad signature');
      throw invalidSignature();
    }
    req.verified();
  }

  /** The call a provider_a callback is about: by the call id we put in its URL (read by `byId`), else by CallSid. */
  private async callOfA<T extends CallIdentity>(
    req: CarrierRequest,
    params: FormParams,
    byId: (id: string) => Promise<T | undefined>,
  ): Promise<T | CallRow | undefined> {
    const callId = req.callId !== undefined && CALL_ID.test(req.callId) ? req.callId : null;
    const call = callId ? await byId(callId) : await this.store.findByCallSid('provider_a', one(params, 'CallSid'));
    return call?.provider === 'provider_a' ? call : undefined;
  }

  private callForA(req: CarrierRequest, params: FormParams): Promise<CallRow | undefined> {
    return this.callOfA(req, params, (id) => this.store.get(id));
  }

  /** As callForA, the call's identity only (kept in memory: a call's reports cost no read of it). */
  private identityForA(req: CarrierRequest, params: FormParams): Promise<CallIdentity | undefined> {
    return this.callOfA(req, params, (id) => this.store.identity(id));
  }

  /** The voice webhook: TwiML connecting the call to our media stream (or rejecting / hanging it up). */
  async providerAVoice(req: CarrierRequest): Promise<string> {
    const params = formParams(req.rawBody);
    const callSid = one(params, 'CallSid');
    const outbound = one(params, 'Direction') !== 'inbound' || req.callId !== undefined;
    if (outbound) {
      const call = await this.callForA(req, params);
      // No such call: refused as a bad signature is (403), never 404.
      this.verifyA(req, call ? await this.agentOf(call) : null, params);
      if (!call) throw invalidSignature();
      if (isTerminal(call.status) || call.hangup_requested_at) return hangupTwiml();
      if (call.media_started_at) throw streamConnected();
      const token = newStreamToken();
      const now = this.clock.now();
      const moved = await this.store.offerStream(call, {
        stream_token_hash: sha256Hex(token),
        call_sid: call.call_sid ?? callSid,
        status: 'in_progress',
        answered_at: call.answered_at ?? now,
        deadline_at: new Date(now.getTime() + this.opts.orphanAfterMs),
      });
      if (!moved) {
        const again = await this.store.get(call.id);
        if (again?.media_started_at && !isTerminal(again.status)) throw streamConnected();
        return hangupTwiml();
      }
      return streamTwiml(this.urls.media('provider_a'), { call_id: call.id, stream_token: token });
    }
    const to = one(params, 'To');
    // A number no agent answers here is refused as a bad signature is (403): whether a number is
    // served here is not told to unsigned requests.
    const agent = await this.agents.inboundAgent('provider_a', to);
    this.verifyA(req, agent, params);
    if (!agent) throw invalidSignature();
    const existing = await this.store.findByCallSid('provider_a', callSid);
    if (existing) {
      // The carrier asked again (a retry): a fresh stream token for the same call.
      if (isTerminal(existing.status)) return hangupTwiml();
      const token = newStreamToken();
      if (!(await this.store.offerStream(existing.id, { stream_token_hash: sha256Hex(token) }))) {
        const again = await this.store.get(existing.id);
        if (again && !isTerminal(again.status)) throw streamConnected();
        return hangupTwiml();
      }
      return streamTwiml(this.urls.media('provider_a'), { call_id: existing.id, stream_token: token });
    }
    const created = await this.calls.createInbound(agent, { provider: 'provider_a', callSid, from: one(params, 'From'), to });
    if (!created) return rejectTwiml('busy');
    return streamTwiml(this.urls.media('provider_a'), { call_id: created.row.id, stream_token: created.streamToken });
  }

  async providerAStatus(req: CarrierRequest): Promise<void> {
    const params = formParams(req.rawBody);
    const call = await this.identityForA(req, params);
    // An unknown call is refused as a bad signature is (403), not acknowledged (204): no oracle.
    this.verifyA(req, call ? await this.agentOf(call) : null, params);
    if (!call) throw invalidSignature();
    // A report older than one recorded changes nothing: each write below records `carrier_seq` only
    // when newer (the store's guard), so the check and the write are one statement.
    const seq = Number(one(params, 'SequenceNumber'));
    const mapped = providerAStatus(one(params, 'CallStatus'));
    const seqPatch = Number.isFinite(seq) ? { carrier_seq: seq } : {};
    const callSid = one(params, 'CallSid');
    if (!mapped) {
      await this.store.update(call.id, seqPatch);
      return;
    }
    if (mapped.kind === 'progress') await this.progress(call, mapped.status, { ...seqPatch, call_sid: this.store.recordedOr('call_sid', callSid) });
    else await this.ended(call, mapped.outcome, seqPatch);
  }

  async providerAAmd(req: CarrierRequest): Promise<void> {
    const params = formParams(req.rawBody);
    const call = await this.callForA(req, params);
    this.verifyA(req, call ? await this.agentOf(call) : null, params);
    if (!call) throw invalidSignature();
    const { answeredBy, greetingEnded } = providerAAnsweredBy(one(params, 'AnsweredBy'));
    await this.machineDetected(call, answeredBy, greetingEnded);
  }

  // Shared effects

  /** A forward move the carrier reports, with what it was answered (from the row as the move finds it). */
  private async progress(call: CallKey, status: 'initiated' | 'ringing' | 'in_progress', extra: CallValues = {}): Promise<void> {
    const now = this.clock.now();
    const orphanAt = new Date(now.getTime() + this.opts.orphanAfterMs);
    const answered =
      status === 'in_progress'
        ? {
            answered_at: this.store.recordedOr('answered_at', now),
            // A call whose media stream has started keeps its deadline (its bridge renews it).
            deadline_at: this.store.knex.raw('case when media_started_at is null then ? else deadline_at end', [orphanAt]),
          }
        : {};
    // `extra` (the carrier's sequence number, its call id) is recorded even when the move is not one.
    await this.store.advance(call, { status, ...answered }, movableFrom(status), extra);
  }

  /**
   * The carrier says the call is over: a call with live media hears it from its bridge (its deadline
   * moved to the status grace); others end now, claimed for finalisation by the same statement.
   */
  private async ended(call: CallKey, outcome: CarrierOutcome, extra: CallValues = {}): Promise<void> {
    const now = this.clock.now();
    const updated = await this.store.carrierEnded(
      call.id,
      { carrier_outcome: outcome, ended_at: this.store.recordedOr('ended_at', now), ...extra },
      new Date(now.getTime() + this.opts.statusGraceMs),
      FINALISE_CLAIM_STALE_MS,
    );
    if (!updated) return;
    const { row, claimed } = updated;
    if (row.media_started_at && !row.media_ended_at) {
      await this.signals.send({ callId: call.id, kind: 'carrier_ended' }, this.store.knex);
      return;
    }
    if (claimed) await this.finaliser.finaliseClaimed(row);
  }

  /**
   * The first answering-machine result of a call wins (enforced by the update's guard): a later or
   * replayed one changes nothing, except that a machine's end of greeting after its detection still
   * tells the bridge the beep came.
   */
  private async machineDetected(call: CallRow, answeredBy: 'human' | 'machine' | 'unknown', greetingEnded: boolean): Promise<void> {
    const updated = await this.store.recordAnsweredBy(call.id, answeredBy);
    if (updated) {
      await this.signals.send({ callId: call.id, kind: 'amd', answeredBy, greetingEnded }, this.store.knex);
      return;
    }
    if (answeredBy !== 'machine' || !greetingEnded) return;
    const now = await this.store.get(call.id);
    if (now?.answered_by === 'machine' && !isTerminal(now.status)) await this.signals.send({ callId: call.id, kind: 'greeting_ended' }, this.store.knex);
  }

  // provider_b

  private async keysFor(call: CallRow | undefined, inboundAgent: RuntimeAgent | null): Promise<KeyObject[]> {
    if (this.opts.providerBKeyOverride) return [publicKeyFromBase64(this.opts.providerBKeyOverride)].filter((k): k is KeyObject => k !== null);
    const agent = inboundAgent ?? (call ? await this.agentOf(call) : null);
    const key = agent?.providerB?.publicKey ? publicKeyFromBase64(agent.providerB.publicKey) : null;
    return key ? [key] : [];
  }

  async providerBEvent(req: CarrierRequest, body: { data: { event_type: string; id: string; payload: Record<string, unknown> } }): Promise<void> {
    const { event_type: type, id, payload } = body.data;
    const callSid = String(payload.call_control_id);
    const state = decodeClientState(payload.client_state);
    let call = state ? await this.store.get(state.call_id) : await this.store.findByCallSid('provider_b', callSid);
    if (call && call.provider !== 'provider_b') call = undefined;
    const incoming = type === 'call.initiated' && payload.direction === 'incoming' && !call;
    const inboundAgent = incoming && typeof payload.to === 'string' ? await this.agents.inboundAgent('provider_b', payload.to) : null;
    // An unknown call is not acknowledged before the signature is checked: with no key to check it
    // (no call, no agent on the number) it is refused as a bad signature is.
    const keys = await this.keysFor(call, inboundAgent);
    const check = keys.length
      ? verifyProviderBSignature(keys, req.rawBody, req.header(SIGNATURE_HEADER), req.header(TIMESTAMP_HEADER), Math.floor(this.clock.now().getTime() / 1000))
      : 'invalid_signature';
    if (check !== 'ok') {
      this.log.warn({ eventType: type, check }, 'provider_b event refused');
      if (check === 'signature_expired') throw forbidden('signature_expired', 'The request timestamp is more than 300 seconds from now.');
      throw invalidSignature();
    }
    req.verified();
    if (!(await this.store.firstSighting('provider_b', id))) return;
    if (incoming) {
      await this.inboundB(inboundAgent, callSid, payload);
      return;
    }
    if (!call) return;
    switch (type) {
      case 'call.initiated':
        await this.progress(call, 'initiated', { call_sid: call.call_sid ?? callSid });
        return;
      case 'call.answered':
        await this.progress(call, 'in_progress', { call_sid: call.call_sid ?? callSid });
        return;
      case 'call.machine.detection.ended':
        await this.machineDetected(call, providerBAnsweredBy(typeof payload.result === 'string' ? payload.result : null), false);
        return;
      case 'call.machine.greeting.ended':
        await this.signals.send({ callId: call.id, kind: 'greeting_ended' }, this.store.knex);
        return;
      case 'call.hangup': {
        const cause = typeof payload.hangup_cause === 'string' ? payload.hangup_cause : null;
        await this.ended(call, providerBHangup(cause, Boolean(call.answered_at)));
        return;
      }
      default:
        return;
    }
  }

  private async inboundB(agent: RuntimeAgent | null, callSid: string, payload: Record<string, unknown>): Promise<void> {
    if (!agent) {
      this.log.info('provider_b inbound call to a number no agent answers; ignored');
      return;
    }
    const credentials = credentialsOf(agent, 'provider_b');
    const created = await this.calls.createInbound(agent, { provider: 'provider_b', callSid, from: String(payload.from ?? ''), to: String(payload.to ?? '') });
    try {
      if (!created) await this.providerB.reject(credentials, callSid);
      else await this.providerB.answer(credentials, callSid, { call_id: created.row.id, stream_token: created.streamToken });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'provider_b did not take our answer to an inbound call');
      if (created) {
        await this.store.update(created.row.id, { carrier_outcome: 'failed' });
        await this.finaliser.finalise(created.row.id);
      }
    }
  }
}
