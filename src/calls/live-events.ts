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
import { isTerminal, type CallRow, type CallStatus, type StatusMove } from './store.js';

type LiveCallStatus = 'queued' | 'ringing' | 'in_progress' | 'transferring' | 'ended';

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

  /** The store's status observer: each move's `status` event and `call.status_changed`, in `trx`. */
  async statusMoved(moves: StatusMove[], trx: Knex.Transaction): Promise<void> {
    const shown = moves.flatMap(({ row }) => {
      const status = liveStatusOf(row.status);
      return status ? [{ row, status }] : [];
    });
    if (shown.length === 0) return;
    await this.writer.writeIn(
      trx,
      shown.map(({ row, status }) => ({ workspaceId: row.workspace_id, conversationId: row.id, type: 'status' as const, data: this.statusData(row, status) })),
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

  private statusData(row: CallRow, status: LiveCallStatus) {
    const ended = status === 'ended';
    return {
      status,
      call_status: row.status,
      end_reason: ended ? row.end_reason : null,
      reason: ended ? row.carrier_outcome : null,
    };
  }

  private webhookFields(row: CallRow, status: LiveCallStatus) {
    return { call_id: row.id, agent_id: row.agent_id, batch_id: row.batch_id, ...this.statusData(row, status) };
  }

  /** The call's record is final (in the finaliser's transaction, after its `call.completed`). */
  async ended(row: CallRow, trx: Knex.Transaction): Promise<void> {
    await this.writer.writeIn(trx, [
      {
        workspaceId: row.workspace_id,
        conversationId: row.id,
        type: 'end',
        data: { status: row.status, end_reason: row.end_reason, timestamp: (row.ended_at ? new Date(row.ended_at) : this.clock.now()).getTime() / 1000 },
      },
    ]);
  }

  /** The agent is handing the call over: `transferring` (stream and webhook) and the `transfer` event. */
  async transferring(row: CallRow, to: string): Promise<void> {
    this.writer.append(row.workspace_id, row.id, 'transfer', { to, status: 'started' });
    this.writer.append(row.workspace_id, row.id, 'status', this.statusData(row, 'transferring'));
    await this.publisher
      .callStatusChanged({
        workspaceId: row.workspace_id,
        payload: { ...this.webhookFields(row, 'transferring'), call_status: row.status, timestamp: this.clock.now() },
      })
      .catch((err) => this.log.warn({ err, callId: row.id }, 'call.status_changed (transferring) not recorded'));
  }

  /** The transfer did not happen: the call goes on. */
  transferFailed(row: CallRow, to: string): void {
    this.writer.append(row.workspace_id, row.id, 'transfer', { to, status: 'failed' });
    this.writer.append(row.workspace_id, row.id, 'status', this.statusData(row, 'in_progress'));
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
