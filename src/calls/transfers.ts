/**
 * The agent's transfer attempts on a call (`call_transfers`, migration 050): `transfers` on the call
 * record and in `call.completed`. A row is written when the agent asks for a transfer, before the
 * carrier is asked (so a stream that ends while the request is open finds it), and given its outcome
 * once the carrier answers; the finaliser settles a row still open when its call ends. Reads show
 * settled attempts only, and every read is scoped by workspace.
 */
import type { Knex } from 'knex';
import type { components } from '../../generated/openapi.js';
import { newId } from '../lib/ids.js';

export type CallTransferView = components['schemas']['CallTransfer'];
export type TransferOutcome = CallTransferView['outcome'];

interface TransferRow {
  id: string;
  workspace_id: string;
  call_id: string;
  seq: number;
  destination_name: string;
  target_type: 'phone_number';
  target: string;
  reason: string | null;
  outcome: TransferOutcome | null;
  refusal_code: string | null;
  started_at: Date;
  ended_at: Date | null;
}

/** The longest reason kept (the contract's `maxLength`); the model's longer text is cut. */
export const TRANSFER_REASON_MAX = 500;

export interface TransferStart {
  workspaceId: string;
  callId: string;
  /** 1.. within the call. */
  seq: number;
  destination: string;
  to: string;
  reason: string | null;
  startedAt: Date;
}

const view = (r: TransferRow): CallTransferView => ({
  transfer_id: r.id,
  destination: r.destination_name,
  to: r.target,
  reason: r.reason,
  outcome: r.outcome!,
  refusal_code: r.refusal_code,
  started_at: new Date(r.started_at).toISOString(),
  ended_at: new Date(r.ended_at!).toISOString(),
});

export class CallTransferStore {
  constructor(private readonly knex: Knex) {}

  /** A new attempt: open (its outcome to come), or already `refused` with its code. */
  async start(s: TransferStart, refused: { code: string } | null = null, db: Knex = this.knex): Promise<string> {
    const id = newId('callTransfer');
    await db('call_transfers').insert({
      id,
      workspace_id: s.workspaceId,
      call_id: s.callId,
      seq: s.seq,
      destination_name: s.destination,
      target_type: 'phone_number',
      target: s.to,
      reason: s.reason === null ? null : s.reason.slice(0, TRANSFER_REASON_MAX),
      outcome: refused ? 'refused' : null,
      refusal_code: refused?.code ?? null,
      started_at: s.startedAt,
      ended_at: refused ? s.startedAt : null,
    });
    return id;
  }

  /** The open attempt's outcome; an attempt already settled (by the finaliser) keeps its own. */
  async settle(workspaceId: string, id: string, outcome: 'transferred' | 'failed', endedAt: Date): Promise<void> {
    await this.knex('call_transfers').where({ workspace_id: workspaceId, id }).whereNull('outcome').update({ outcome, ended_at: endedAt });
  }

  /**
   * The call ended with attempts still open (the instance stopped while the carrier was asked): a call
   * that ended `transferred` was handed over, any other was not.
   */
  async settleOpen(workspaceId: string, callId: string, transferred: boolean, endedAt: Date, db: Knex = this.knex): Promise<void> {
    await db('call_transfers')
      .where({ workspace_id: workspaceId, call_id: callId })
      .whereNull('outcome')
      .update({ outcome: transferred ? 'transferred' : 'failed', ended_at: endedAt });
  }

  /**
   * The settled attempts of each call (the calls of one workspace), in order; a call with none is
   * absent. One whose carrier request is open is not shown until it has its outcome.
   */
  async of(workspaceId: string, callIds: string[], db: Knex = this.knex): Promise<Map<string, CallTransferView[]>> {
    const out = new Map<string, CallTransferView[]>();
    if (callIds.length === 0) return out;
    const rows = await db<TransferRow>('call_transfers')
      .where({ workspace_id: workspaceId })
      .whereIn('call_id', callIds)
      .whereNotNull('outcome')
      .orderBy([{ column: 'call_id' }, { column: 'seq' }]);
    for (const r of rows) {
      const list = out.get(r.call_id) ?? [];
      list.push(view(r));
      out.set(r.call_id, list);
    }
    return out;
  }
}
