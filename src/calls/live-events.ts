/**
 * A phone call's live events (issue 22): its status moves and its `end` on its event stream (written
 * in the transaction that records them, src/events/), and the opt-in webhooks `call.status_changed`
 * and `call.transcript` (src/webhooks/events.ts; sent only to webhooks that list them). The bridge
 * streams the conversation's own events (transcript, tools, interruptions, keys) through the engine.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { LiveEventWriter } from '../events/writer.js';
import type { CallLivePublisher } from '../webhooks/events.js';
import type { TranscriptTurn } from '../voice/types.js';
import { isTerminal, type CallKey, type CallRow, type CallStatus, type CallValues, type InlineWrite, type StatusMove } from './store.js';

type LiveCallStatus = 'queued' | 'ringing' | 'in_progress' | 'transferring' | 'ended';

/** One transfer attempt as the live `transfer` event names it. */
export interface LiveTransfer {
  transferId: string;
  destination: string;
  to: string;
}

/** The live status a record's status shows (`initiated`, the carrier taking the dial, is not one). */
function liveStatusOf(status: CallStatus): LiveCallStatus | null {
  if (isTerminal(status)) return 'ended';
  if (status === 'initiated') return null;
  return status as LiveCallStatus;
}

export class CallLiveEvents {
  constructor(
    private readonly writer: LiveEventWriter,
    private readonly publisher: CallLivePublisher,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /**
   * A move into `to` written by the move's own statement (CallStore's status observer), when the
   * workspace has no webhook listing `call.status_changed` (a cached answer, as statusMoved's): a live
   * status move's `status` event; a terminal move's `status` and `end`, built from `predicted` (the
   * finaliser's row and values), assuming the carrier outcome it read; nothing for `initiated` (not
   * shown). Null otherwise (statusMoved, in a transaction).
   */
  async inlineMove(call: CallKey, to: CallStatus, gate: string, predicted: Partial<CallValues>, trx?: Knex.Transaction): Promise<InlineWrite | null> {
    const status = liveStatusOf(to);
    if (status === null) return { ctes: null };
    // Every status event says the call's version (fixed at creation): known when the caller's row or
    // identity has it, else the move is told to statusMoved, which has the row.
    if (!('agent_version' in predicted) || (predicted.agent_version !== null && typeof predicted.agent_version !== 'number')) return null;
    if (await this.publisher.listens(call.workspace_id, 'call.status_changed', trx)) return null;
    if (status !== 'ended') {
      const data = { agent_version: predicted.agent_version, status, call_status: to, end_reason: null, reason: null };
      return this.writer.ctesFor([{ workspaceId: call.workspace_id, conversationId: call.id, type: 'status', data }], gate);
    }
    const { end_reason: endReason, ended_at: endedAt, carrier_outcome: outcome } = predicted;
    const plain = (v: unknown) => v === null || typeof v === 'string' || v instanceof Date;
    if (!('carrier_outcome' in predicted) || !plain(outcome) || endReason === undefined || !plain(endReason) || endedAt === undefined || !plain(endedAt))
      return null;
    const row = { ...call, agent_version: predicted.agent_version, status: to, end_reason: endReason, ended_at: endedAt, carrier_outcome: outcome } as CallRow;
    const { ctes, written } = this.writer.ctesFor(
      [{ workspaceId: call.workspace_id, conversationId: call.id, type: 'status', data: this.statusData(row, status) }, this.endEvent(row)],
      gate,
    );
    return { ctes, written, assumes: { carrier_outcome: row.carrier_outcome } };
  }

  /**
   * The store's status observer: each move's `status` event and `call.status_changed`, in `trx`. A
   * move into a terminal status is the finaliser's write of the final record (nothing else makes a call
   * terminal), so the call's `end`, the stream's last event, goes in the same statement: a stream ends
   * once the record is final.
   */
  async statusMoved(moves: StatusMove[], trx: Knex.Transaction): Promise<void> {
    const shown = moves.flatMap(({ row }) => {
      const status = liveStatusOf(row.status);
      return status ? [{ row, status }] : [];
    });
    if (shown.length === 0) return;
    await this.writer.writeIn(
      trx,
      shown.flatMap(({ row, status }) => [
        { workspaceId: row.workspace_id, conversationId: row.id, type: 'status' as const, data: this.statusData(row, status) },
        ...(status === 'ended' ? [this.endEvent(row)] : []),
      ]),
    );
    const now = this.clock.now();
    const listening = new Map<string, boolean>();
    for (const { row, status } of shown) {
      let listens = listening.get(row.workspace_id);
      if (listens === undefined) listening.set(row.workspace_id, (listens = await this.publisher.listens(row.workspace_id, 'call.status_changed', trx)));
      if (!listens) continue;
      await this.publisher.callStatusChanged({ workspaceId: row.workspace_id, payload: { ...this.webhookFields(row, status), timestamp: now } }, trx);
    }
  }

  /** A `status` event's fields: the move, and the version the call runs (`call.status_changed` has no such field). */
  private statusData(row: CallRow, status: LiveCallStatus) {
    return { agent_version: row.agent_version, ...this.moveFields(row, status) };
  }

  private moveFields(row: CallRow, status: LiveCallStatus) {
    const ended = status === 'ended';
    return {
      status,
      call_status: row.status,
      end_reason: ended ? row.end_reason : null,
      reason: ended ? row.carrier_outcome : null,
    };
  }

  private webhookFields(row: CallRow, status: LiveCallStatus) {
    return { call_id: row.id, agent_id: row.agent_id, batch_id: row.batch_id, ...this.moveFields(row, status) };
  }

  /** The call's `end`: its record is final. */
  private endEvent(row: CallRow) {
    return {
      workspaceId: row.workspace_id,
      conversationId: row.id,
      type: 'end' as const,
      data: { status: row.status, end_reason: row.end_reason, timestamp: (row.ended_at ? new Date(row.ended_at) : this.clock.now()).getTime() / 1000 },
    };
  }

  /** The agent is handing the call over: `transferring` (stream and webhook) and the `transfer` event. */
  async transferring(row: CallRow, t: LiveTransfer): Promise<void> {
    this.writer.append(row.workspace_id, row.id, 'transfer', {
      transfer_id: t.transferId,
      destination: t.destination,
      to: t.to,
      status: 'started',
      outcome: null,
    });
    this.writer.append(row.workspace_id, row.id, 'status', this.statusData(row, 'transferring'));
    await this.publisher
      .callStatusChanged({
        workspaceId: row.workspace_id,
        payload: { ...this.webhookFields(row, 'transferring'), call_status: row.status, timestamp: this.clock.now() },
      })
      .catch((err) => this.log.warn({ err, callId: row.id }, 'call.status_changed (transferring) not recorded'));
  }

  /**
   * The transfer did not happen: the call goes on. A refused one never left `in_progress`; a failed
   * one goes back to it from `transferring`.
   */
  transferFailed(row: CallRow, t: LiveTransfer, outcome: 'failed' | 'refused'): void {
    this.writer.append(row.workspace_id, row.id, 'transfer', { transfer_id: t.transferId, destination: t.destination, to: t.to, status: 'failed', outcome });
    if (outcome === 'failed') this.writer.append(row.workspace_id, row.id, 'status', this.statusData(row, 'in_progress'));
  }

  /** A transcript entry was kept: `call.transcript` for the webhooks that list it (not waited for). */
  transcript(row: CallRow, turn: TranscriptTurn): void {
    const payload = {
      call_id: row.id,
      agent_id: row.agent_id,
      role: turn.role,
      text: turn.text,
      ...(turn.dtmf ? { dtmf: turn.dtmf } : {}),
      timestamp: turn.timestamp,
    };
    // Asked first (a cached answer): a workspace with no webhook listing the kind costs no transaction per utterance.
    const raise = async () => {
      if (await this.publisher.listens(row.workspace_id, 'call.transcript')) {
        await this.publisher.callTranscript({ workspaceId: row.workspace_id, batchId: row.batch_id, payload });
      }
    };
    raise().catch((err) => this.log.warn({ err, callId: row.id }, 'call.transcript not recorded'));
  }

  /** The sink the call's conversation emits into. */
  sink(row: CallRow) {
    return this.writer.sink(row.workspace_id, row.id);
  }

  /** Writes what the call's conversation queued (before its record is finalised). */
  flush(): Promise<void> {
    return this.writer.flush();
  }
}
