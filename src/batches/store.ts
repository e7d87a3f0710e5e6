/**
 * Batches and their recipients in PostgreSQL. The engine's writes run inside a transaction that
 * holds the batch row (`lock`), so one dispatch round, cancel, pause or retry acts on a batch at a
 * time across instances; recipients are claimed with FOR UPDATE SKIP LOCKED on top of that.
 */
import type { ConversationSettingsInput } from '../voice/conversation-settings.js';
import type { Variables } from '../contract/placeholders.js';
import type { Knex } from 'knex';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';
import type { CallingWindow } from './calling-window.js';
import type { Provider } from '../carriers/index.js';

export type BatchStatus = 'scheduled' | 'queued' | 'in_progress' | 'paused' | 'completed' | 'canceled' | 'failed';
export type RecipientStatus = 'pending' | 'scheduled' | 'dialing' | 'in_progress' | 'completed' | 'failed' | 'voicemail' | 'no_answer' | 'busy' | 'canceled';
export type RetryOutcome = 'busy' | 'no_answer' | 'failed';

export const TERMINAL_BATCH: readonly BatchStatus[] = ['completed', 'canceled', 'failed'];
/** Waiting to be dialed. */
export const WAITING: readonly RecipientStatus[] = ['pending', 'scheduled'];
/** A call of theirs is live (`in_progress` is shown from the call; stored recipients stay `dialing`). */
export const LIVE: readonly RecipientStatus[] = ['dialing', 'in_progress'];
/** Where `retryBatch` picks recipients up again. */
export const RETRYABLE: readonly RecipientStatus[] = ['failed', 'no_answer', 'busy', 'voicemail'];

export interface SkippedItem {
  index: number;
  row: number | null;
  column: string | null;
  to_number: string | null;
  reason: 'invalid_number' | 'duplicate' | 'invalid_row' | 'invalid_value' | 'destination_type_not_allowed' | 'destination_country_not_allowed' | 'do_not_call';
  message: string;
}

export interface BatchRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  /** The agent version every call of the batch runs, fixed at creation; null: a batch from before migration 046 (the published one). */
  agent_version: number | null;
  name: string;
  provider: Provider;
  status: BatchStatus;
  total: number;
  skipped: SkippedItem[];
  webhook_url: string | null;
  /** The batch's own recording choice for its calls; null: the agent's. */
  recording_enabled: boolean | null;
  /** The batch's override of the agent's conversation settings for its calls; null: the agent's. */
  conversation: ConversationSettingsInput | null;
  concurrency: number;
  retry_max_attempts: number;
  retry_delay_s: number;
  retry_on: RetryOutcome[];
  calling_window: CallingWindow | null;
  failure_reason: string | null;
  /** Since when the batch waits in its workspace's line for a free slot (null: it does not). */
  slot_wait_since: Date | null;
  scheduled_at: Date;
  created_at: Date;
  completed_at: Date | null;
  updated_at: Date;
}

export interface RecipientRow {
  id: string;
  batch_id: string;
  position: number;
  to_number: string;
  variables: Variables;
  first_message: string | null;
  timezone: string | null;
  /** The recipient's own override of the conversation settings, applied over the batch's. */
  conversation: ConversationSettingsInput | null;
  status: RecipientStatus;
  attempts: number;
  round_attempts: number;
  call_id: string | null;
  call_ids: string[];
  outcome: string | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  updated_at: Date;
}

/** What a batch call's end reads of its batch and recipient (BatchStore.endingCall). */
export type EndingBatch = Pick<BatchRow, 'id' | 'agent_id' | 'status' | 'retry_max_attempts' | 'retry_delay_s' | 'retry_on'>;
export type EndingRecipient = Pick<RecipientRow, 'id' | 'status' | 'round_attempts'>;

export type NewBatch = Omit<BatchRow, 'completed_at' | 'updated_at' | 'failure_reason' | 'slot_wait_since'>;
export type NewRecipient = Pick<
  RecipientRow,
  'id' | 'position' | 'to_number' | 'variables' | 'first_message' | 'timezone' | 'conversation' | 'status' | 'next_attempt_at'
>;

export interface Counts {
  completed_count: number;
  failed_count: number;
  voicemail_count: number;
}

export interface BatchFilters {
  agent_id?: string;
  status?: BatchStatus;
  created_after?: string;
  created_before?: string;
}

/** Rows per INSERT statement: PostgreSQL takes at most 65,535 bind parameters per statement. */
const INSERT_CHUNK = 2000;

function encodeBatch(b: Partial<BatchRow>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...b };
  for (const c of ['skipped', 'retry_on', 'calling_window', 'conversation'] as const)
    if (c in out && out[c] !== undefined) out[c] = out[c] === null ? null : JSON.stringify(out[c]);
  return out;
}

export class BatchStore {
  constructor(private readonly db: Knex) {}

  get knex(): Knex {
    return this.db;
  }

  async insert(batch: NewBatch, recipients: NewRecipient[], trx: Knex.Transaction): Promise<BatchRow> {
    const [row] = await trx('batches').insert(encodeBatch(batch)).returning('*');
    for (let i = 0; i < recipients.length; i += INSERT_CHUNK) {
      await trx('batch_recipients').insert(
        recipients.slice(i, i + INSERT_CHUNK).map((r) => ({
          ...r,
          batch_id: batch.id,
          variables: JSON.stringify(r.variables),
          conversation: r.conversation === null ? null : JSON.stringify(r.conversation),
        })),
      );
    }
    return row;
  }

  get(id: string, trx?: Knex.Transaction): Promise<BatchRow | undefined> {
    return (trx ?? this.db)('batches').where({ id }).first();
  }

  /** The batch row, locked until `trx` ends. */
  lock(trx: Knex.Transaction, id: string): Promise<BatchRow | undefined> {
    return trx('batches').where({ id }).forUpdate().first();
  }

  async update(trx: Knex.Transaction, id: string, values: Partial<BatchRow>): Promise<BatchRow> {
    const [row] = await trx('batches')
      .where({ id })
      .update({ ...encodeBatch(values), updated_at: trx.fn.now() })
      .returning('*');
    return row;
  }

  list(workspaceId: string, filters: BatchFilters, params: PageParams): Promise<Page<BatchRow>> {
    const q = this.db('batches').where({ workspace_id: workspaceId }).select('*');
    if (filters.agent_id !== undefined) q.where('agent_id', filters.agent_id);
    if (filters.status !== undefined) q.where('status', filters.status);
    if (filters.created_after) q.where('created_at', '>=', new Date(filters.created_after));
    if (filters.created_before) q.where('created_at', '<', new Date(filters.created_before));
    return paginate<BatchRow, BatchRow>(q, params, (r) => r);
  }

  /** Recipients in request order; a `dialing` one whose call was answered reads `in_progress`. */
  recipients(batchId: string): Promise<RecipientRow[]> {
    return this.db('batch_recipients as r')
      .leftJoin('calls as c', 'c.id', 'r.call_id')
      .where('r.batch_id', batchId)
      .orderBy('r.position')
      .select('r.*', this.db.raw(`case when r.status = 'dialing' and c.status = 'in_progress' then 'in_progress' else r.status end as status`));
  }

  /** Outcome counts per batch. */
  async counts(batchIds: string[], trx?: Knex.Transaction): Promise<Map<string, Counts>> {
    const out = new Map<string, Counts>(batchIds.map((id) => [id, { completed_count: 0, failed_count: 0, voicemail_count: 0 }]));
    if (!batchIds.length) return out;
    const rows: Array<{ batch_id: string; completed: string; failed: string; voicemail: string }> = await (trx ?? this.db)('batch_recipients')
      .whereIn('batch_id', batchIds)
      .groupBy('batch_id')
      .select(
        'batch_id',
        (trx ?? this.db).raw(`count(*) filter (where status = 'completed') as completed`),
        (trx ?? this.db).raw(`count(*) filter (where status in ('failed', 'no_answer', 'busy')) as failed`),
        (trx ?? this.db).raw(`count(*) filter (where status = 'voicemail') as voicemail`),
      );
    for (const r of rows) out.set(r.batch_id, { completed_count: Number(r.completed), failed_count: Number(r.failed), voicemail_count: Number(r.voicemail) });
    return out;
  }

  /** How many recipients are live, and how many are not yet terminal (both counted on partial indexes). */
  async progress(trx: Knex.Transaction, batchId: string): Promise<{ live: number; open: number }> {
    const { rows } = await trx.raw(
      `select (select count(*) from batch_recipients where batch_id = :id and status in ('dialing', 'in_progress')) as live,
              (select count(*) from batch_recipients where batch_id = :id and status in ('pending', 'scheduled')) as waiting`,
      { id: batchId },
    );
    const live = Number(rows[0].live);
    return { live, open: live + Number(rows[0].waiting) };
  }

  /** Whether any recipient of the batch was ever called. */
  async attempted(trx: Knex.Transaction, batchId: string): Promise<boolean> {
    return Boolean(await trx('batch_recipients').where({ batch_id: batchId }).where('attempts', '>', 0).first('id'));
  }

  /** The workspace's batches waiting for a free slot, longest waiting first. */
  async waitingForSlots(workspaceId: string, limit: number): Promise<string[]> {
    const rows: Array<{ id: string }> = await this.db('batches')
      .where({ workspace_id: workspaceId })
      .whereNotNull('slot_wait_since')
      .orderBy('slot_wait_since')
      .orderBy('id')
      .limit(limit)
      .select('id');
    return rows.map((r) => r.id);
  }

  /** What the workspace's batches not yet over hold: how many, and how many recipients wait in them. */
  async openLoad(trx: Knex.Transaction, workspaceId: string): Promise<{ batches: number; waiting: number }> {
    const { rows } = await trx.raw(
      `select (select count(*) from batches where workspace_id = :ws and completed_at is null) as batches,
              (select count(*) from batch_recipients r join batches b on b.id = r.batch_id
                where b.workspace_id = :ws and b.completed_at is null and r.status in ('pending', 'scheduled')) as waiting`,
      { ws: workspaceId },
    );
    return { batches: Number(rows[0].batches), waiting: Number(rows[0].waiting) };
  }

  /** Serialises the creations of one workspace's batches (the caps are counted under it). */
  async lockWorkspaceCreations(trx: Knex.Transaction, workspaceId: string): Promise<void> {
    await trx.raw(`select pg_advisory_xact_lock(hashtext('batch_create:' || ?))`, [workspaceId]);
  }

  /** Scheduled recipients whose time has come become pending (they wait for a slot). */
  async markDue(trx: Knex.Transaction, batchId: string, now: Date): Promise<void> {
    await trx('batch_recipients')
      .where({ batch_id: batchId, status: 'scheduled' })
      .where('next_attempt_at', '<=', now)
      .update({ status: 'pending', updated_at: trx.fn.now() });
  }

  /** Due recipients in request order, claimed (skipping rows another transaction holds, and `except`: rows this one already claimed). */
  claimDue(trx: Knex.Transaction, batchId: string, now: Date, limit: number, except: string[] = []): Promise<RecipientRow[]> {
    const q = trx('batch_recipients');
    if (except.length) q.whereNotIn('id', except);
    return q
      .where({ batch_id: batchId })
      .whereIn('status', WAITING as RecipientStatus[])
      .where('next_attempt_at', '<=', now)
      .orderBy('next_attempt_at')
      .orderBy('position')
      .limit(limit)
      .forUpdate()
      .skipLocked()
      .select('*');
  }

  /** The earliest time a waiting recipient falls due after `now`, if any. */
  async nextDue(trx: Knex.Transaction, batchId: string, now: Date): Promise<Date | null> {
    const row = await trx('batch_recipients')
      .where({ batch_id: batchId })
      .whereIn('status', WAITING as RecipientStatus[])
      .where('next_attempt_at', '>', now)
      .min<{ at: Date | null }>('next_attempt_at as at')
      .first();
    return row?.at ?? null;
  }

  /** Claimed recipients whose number was put on the do-not-call list: they will not be called (`canceled`, `do_not_call`). */
  async cancelListed(trx: Knex.Transaction, ids: string[]): Promise<void> {
    if (!ids.length) return;
    await trx('batch_recipients').whereIn('id', ids).update({ status: 'canceled', last_error: 'do_not_call', next_attempt_at: null, updated_at: trx.fn.now() });
  }

  /** Recipients outside the calling window wait for its opening. */
  async postpone(trx: Knex.Transaction, until: Array<{ id: string; at: Date }>): Promise<void> {
    if (!until.length) return;
    await trx.raw(
      `update batch_recipients r set status = 'scheduled', next_attempt_at = u.at, updated_at = now()
       from json_to_recordset(?::json) as u(id text, at timestamptz) where r.id = u.id`,
      [JSON.stringify(until)],
    );
  }

  /** The claimed recipients' calls were written: they are dialing. */
  async markDialing(trx: Knex.Transaction, dialed: Array<{ id: string; call_id: string }>): Promise<void> {
    if (!dialed.length) return;
    await trx.raw(
      `update batch_recipients r set status = 'dialing', call_id = d.call_id, call_ids = array_append(r.call_ids, d.call_id),
         attempts = r.attempts + 1, round_attempts = r.round_attempts + 1, next_attempt_at = null, updated_at = now()
       from json_to_recordset(?::json) as d(id text, call_id text) where r.id = d.id`,
      [JSON.stringify(dialed)],
    );
  }

  /**
   * A batch call's end, in one statement: its batch row, held against a concurrent round, cancel or
   * pause (FOR SHARE), then the recipient whose live call this is (FOR UPDATE), until `trx` ends. The
   * batch is locked first, as a round locks it before its recipients: the recipient's scan is
   * filtered on the batch's CTE (an init plan run before it). Undefined when either is gone.
   */
  async endingCall(trx: Knex.Transaction, batchId: string, callId: string): Promise<{ batch: EndingBatch; recipient: EndingRecipient } | undefined> {
    const { rows } = (await trx.raw(
      `with b as (
         select id, agent_id, status, retry_max_attempts, retry_delay_s, retry_on from batches where id = ? for share
       ), r as (
         select id, status, round_attempts from batch_recipients where call_id = ? and exists (select 1 from b) for update
       )
       select to_jsonb(b) as batch, to_jsonb(r) as recipient from b, r`,
      [batchId, callId],
    )) as { rows: Array<{ batch: EndingBatch; recipient: EndingRecipient }> };
    return rows[0];
  }

  async updateRecipient(trx: Knex.Transaction, id: string, values: Partial<RecipientRow>): Promise<void> {
    await trx('batch_recipients')
      .where({ id })
      .update({ ...values, updated_at: trx.fn.now() });
  }

  /** Every waiting recipient of the batch becomes `status` (cancel, failure). */
  async closeWaiting(trx: Knex.Transaction, batchId: string, status: 'canceled' | 'failed', lastError: string | null): Promise<void> {
    await trx('batch_recipients')
      .where({ batch_id: batchId })
      .whereIn('status', WAITING as RecipientStatus[])
      .update({ status, last_error: lastError, next_attempt_at: null, updated_at: trx.fn.now() });
  }

  /** `retryBatch`: unreached recipients start a new round now; returns how many. */
  reopen(trx: Knex.Transaction, batchId: string, now: Date): Promise<number> {
    return trx('batch_recipients')
      .where({ batch_id: batchId })
      .whereIn('status', RETRYABLE as RecipientStatus[])
      .update({ status: 'pending', round_attempts: 0, next_attempt_at: now, updated_at: trx.fn.now() });
  }

  /** Whether the agent version a call ran asks for voicemail to be retried (`voicemail_config.retry_on_voicemail`; version null: the row's). */
  async agentRetriesVoicemail(trx: Knex.Transaction, agentId: string, version: number | null): Promise<boolean> {
    const row: { voicemail_config: { retry_on_voicemail?: boolean } | null } | undefined =
      version === null
        ? await trx('agents').where({ id: agentId }).first('voicemail_config')
        : await trx('agent_versions').where({ agent_id: agentId, version }).first(trx.raw("config->'voicemail_config' as voicemail_config"));
    return row?.voicemail_config?.retry_on_voicemail ?? true;
  }

  /**
   * Whether the agent has a batch that is not over: not terminal, or canceled/failed with calls still
   * live (`completed_at` is set exactly when a batch is terminal and reported).
   */
  async hasActive(workspaceId: string, agentId: string): Promise<boolean> {
    const row = await this.db('batches').where({ workspace_id: workspaceId, agent_id: agentId }).whereNull('completed_at').first('id');
    return Boolean(row);
  }
}
