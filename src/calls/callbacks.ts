/**
 * What the carriers tell us, verified and applied. A carrier's plug-in reads its message (which call,
 * which account must have signed it, what it means as a neutral CarrierEvent, src/carriers/callbacks.ts);
 * here the call and the account are looked up, the signature checked with that account before
 * anything changes (a failed check is refused with 403 and logged without secrets), and the event
 * applied. The same path takes a message from an HTTP callback or from an in-process carrier.
 *
 * Effects go through the call record (guarded moves of its status, see src/calls/lifecycle.ts); the
 * bridge running the call's media, wherever it is, hears of answering-machine results and of the
 * carrier's end of the call through CallSignals; a call with no live media is finalised here.
 */
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
import type { CallbackAction, CallbackReply, CallbackRequest, CarrierEvent, CarrierMessage, Carriers, Provider } from '../carriers/index.js';
import type { CallSignals } from './live/signals.js';

const CALL_ID = /^call_[0-9A-Z]{26}$/;

export interface InboundAgents {
  findForRuntime(workspaceId: string, agentId: string): Promise<RuntimeAgent | null>;
  /** The agent answering inbound calls to `phoneNumber` at `provider`, if any. */
  inboundAgent(provider: Provider, phoneNumber: string): Promise<RuntimeAgent | null>;
}

export interface CallbackOptions {
  orphanAfterMs: number;
  statusGraceMs: number;
}

const invalidSignature = () => forbidden('invalid_signature', 'The request signature is missing or wrong.');
/** One stream per call: once its media has started, the voice webhook gives no token again (a replay gets this). */
const streamConnected = () => conflict('call_stream_connected', 'The call already has its media stream.');

/** A carrier's HTTP request as its signature covers it. */
export interface CarrierRequest extends CallbackRequest {
  /** Its signature verified: it comes from the carrier (its connection stops counting as a browser's). */
  verified(): void;
}

/** A message's call and the agent whose account must have sent it, as looked up. */
interface Sender {
  call: CallIdentity | CallRow | undefined;
  agent: RuntimeAgent | null;
}

export class CarrierCallbacks {
  constructor(
    private readonly store: CallStore,
    private readonly agents: InboundAgents,
    private readonly calls: CallService,
    private readonly finaliser: CallFinaliser,
    private readonly signals: CallSignals,
    private readonly carriers: Carriers,
    private readonly clock: Clock,
    private readonly opts: CallbackOptions,
    private readonly log: Logger,
  ) {}

  /** One HTTP callback (`operation` of `provider`'s callbacks), answered with what the carrier expects. */
  async http(provider: Provider, operation: string, req: CarrierRequest): Promise<CallbackReply> {
    const message = this.carriers.get(provider).callbacks.read(operation, req);
    return this.receive(provider, operation, message, { path: req.url.split('?')[0], verified: () => req.verified() });
  }

  private agentOf(call: Pick<CallRow, 'workspace_id' | 'agent_id' | 'number_agent_id'>): Promise<RuntimeAgent | null> {
    return this.agents.findForRuntime(call.workspace_id, carrierAgentId(call));
  }

  /**
   * The call a message is about (by our call id when it carries one, else by the carrier's), kept as
   * its identity only when read by id (in memory: a call's reports cost no read of it); and the agent
   * whose account must have sent it: the number's for an incoming call, else the call's. With no such
   * agent the check fails as a bad signature does: an unsigned request learns nothing about which
   * calls or numbers exist.
   */
  private async sender(provider: Provider, m: CarrierMessage): Promise<Sender> {
    const callId = m.call.callId !== null && CALL_ID.test(m.call.callId) ? m.call.callId : null;
    let call: CallIdentity | CallRow | undefined = callId ? await this.store.identity(callId) : await this.store.findByCallSid(provider, m.call.callSid);
    if (call && call.provider !== provider) call = undefined;
    if (m.number && (m.number.always || !call)) return { call, agent: await this.agents.inboundAgent(provider, m.number.to) };
    return { call, agent: call ? await this.agentOf(call) : null };
  }

  /** A carrier's message: checked, then applied; the reply is the carrier's (TwiML, a command, nothing). */
  async receive(provider: Provider, operation: string, m: CarrierMessage, origin: { path: string; verified(): void }): Promise<CallbackReply> {
    const { callbacks } = this.carriers.get(provider);
    const { call, agent } = await this.sender(provider, m);
    const check = m.verify(agent, Math.floor(this.clock.now().getTime() / 1000));
    if (check !== 'ok') {
      this.log.warn({ provider, path: origin.path, callSid: m.call.callSid.slice(0, 64), check }, 'carrier callback refused');
      if (check === 'signature_expired') throw forbidden('signature_expired', 'The request timestamp is more than 300 seconds from now.');
      throw invalidSignature();
    }
    origin.verified();
    const reply = (action: CallbackAction) => callbacks.reply(operation, action, { accounts: agent, callSid: m.call.callSid });
    if (m.eventId !== null && !(await this.store.firstSighting(provider, m.eventId))) return reply({ kind: 'none' });
    const event = m.event(call !== undefined);
    if (event.kind === 'incoming') return this.incoming(provider, m, event, agent, reply);
    // A message about a call we do not know verifies only with a key of no account (a sandbox
    // carrier's); otherwise it was refused above as a bad signature is (403): no oracle.
    if (!call) return reply({ kind: 'none' });
    if (event.kind === 'media_wanted') return reply(await this.mediaWanted(call.id, m.call.callSid));
    await this.apply(call, event, m);
    return reply({ kind: 'none' });
  }

  /** A move the event makes on a known call. */
  private async apply(call: CallIdentity | CallRow, event: Exclude<CarrierEvent, { kind: 'incoming' | 'media_wanted' }>, m: CarrierMessage): Promise<void> {
    // A report older than one recorded changes nothing: each write records `carrier_seq` only when
    // newer (the store's guard), so the check and the write are one statement.
    const seqPatch: CallValues = m.seq !== null ? { carrier_seq: m.seq } : {};
    switch (event.kind) {
      case 'noted':
        if (m.seq !== null) await this.store.update(call.id, seqPatch);
        return;
      case 'progress':
        await this.progress(call, event.status, { ...seqPatch, call_sid: this.store.recordedOr('call_sid', m.call.callSid) });
        return;
      case 'ended': {
        const answered = event.outcome !== event.whenAnswered && Boolean((await this.store.get(call.id))?.answered_at);
        await this.ended(call, answered ? event.whenAnswered : event.outcome, seqPatch);
        return;
      }
      case 'answered_by':
        await this.machineDetected(call, event.answeredBy, event.greetingEnded);
        return;
      case 'greeting_ended':
        await this.signals.send({ callId: call.id, kind: 'greeting_ended' }, this.store.knex);
        return;
    }
  }

  /** An outbound call answered: our media stream with a fresh token (or hang up a call that is over). */
  private async mediaWanted(callId: string, callSid: string): Promise<CallbackAction> {
    const call = await this.store.get(callId);
    if (!call) throw invalidSignature();
    if (isTerminal(call.status) || call.hangup_requested_at) return { kind: 'hangup' };
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
      return { kind: 'hangup' };
    }
    return { kind: 'connect', callId: call.id, streamToken: token };
  }

  /**
   * A call to one of our numbers: recorded and answered with our media (a carrier asking again about
   * the same call gets a fresh stream token), or refused as busy when billing or the slots say no.
   */
  private async incoming(
    provider: Provider,
    m: CarrierMessage,
    event: Extract<CarrierEvent, { kind: 'incoming' }>,
    agent: RuntimeAgent | null,
    reply: (action: CallbackAction) => Promise<CallbackReply>,
  ): Promise<CallbackReply> {
    if (!agent) {
      // Whether a number is served here is not told to unsigned requests.
      if (m.number?.always) throw invalidSignature();
      this.log.info({ provider }, 'inbound call to a number no agent answers; ignored');
      return reply({ kind: 'none' });
    }
    const callSid = m.call.callSid;
    const existing = await this.store.findByCallSid(provider, callSid);
    if (existing) {
      if (isTerminal(existing.status)) return reply({ kind: 'hangup' });
      const token = newStreamToken();
      if (!(await this.store.offerStream(existing.id, { stream_token_hash: sha256Hex(token) }))) {
        const again = await this.store.get(existing.id);
        if (again && !isTerminal(again.status)) throw streamConnected();
        return reply({ kind: 'hangup' });
      }
      return reply({ kind: 'connect', callId: existing.id, streamToken: token });
    }
    const created = await this.calls.createInbound(agent, { provider, callSid, from: event.from, to: event.to });
    try {
      return await reply(created ? { kind: 'connect', callId: created.row.id, streamToken: created.streamToken } : { kind: 'reject' });
    } catch (err) {
      this.log.warn({ provider, err: (err as Error).message }, 'the carrier did not take our answer to an inbound call');
      if (created) {
        await this.store.update(created.row.id, { carrier_outcome: 'failed' });
        await this.finaliser.finalise(created.row.id);
      }
      return { status: 204 };
    }
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
  private async machineDetected(call: CallKey, answeredBy: 'human' | 'machine' | 'unknown', greetingEnded: boolean): Promise<void> {
    const updated = await this.store.recordAnsweredBy(call.id, answeredBy);
    if (updated) {
      await this.signals.send({ callId: call.id, kind: 'amd', answeredBy, greetingEnded }, this.store.knex);
      return;
    }
    if (answeredBy !== 'machine' || !greetingEnded) return;
    const now = await this.store.get(call.id);
    if (now?.answered_by === 'machine' && !isTerminal(now.status)) await this.signals.send({ callId: call.id, kind: 'greeting_ended' }, this.store.knex);
  }
}
