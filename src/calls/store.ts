/**
 * Phone calls in PostgreSQL. Every write that moves a call is guarded by the state it expects (so two
 * instances, or a callback racing the media stream, cannot both move it), and every read by id is
 * followed by a workspace check in the service.
 */
import type { Variables } from '../conversation/placeholders.js';
import type { Knex } from 'knex';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';
import type { ToolCallRecord } from '../conversation/engine.js';
import type { TranscriptTurn } from '../voice/types.js';
import type { AnsweredBy, CarrierOutcome } from '../carriers/carrier.js';
import type { AnalysisResults, AnalysisSetting } from '../conversation/write-up.js';
import type { components } from '../../generated/openapi.js';

type InboundSetupOutcome = components['schemas']['InboundSetupOutcome'];

export type { AnsweredBy, CarrierOutcome };

export type CallStatus = 'queued' | 'initiated' | 'ringing' | 'in_progress' | 'completed' | 'busy' | 'no_answer' | 'failed' | 'canceled' | 'voicemail';
export type LiveStatus = 'queued' | 'initiated' | 'ringing' | 'in_progress';
export type EndReason =
  | 'remote_hangup'
  | 'agent_hangup'
  | 'api_hangup'
  | 'transferred'
  | 'time_limit'
  | 'insufficient_credit'
  | 'plan_limit_reached'
  | 'silence_timeout'
  | 'not_answered'
  | 'canceled'
  | 'carrier_error'
  | 'service_error'
  | 'not_allowed'
  | 'shutdown';

export const LIVE_STATUSES: readonly LiveStatus[] = ['queued', 'initiated', 'ringing', 'in_progress'];
export const TERMINAL_STATUSES: readonly CallStatus[] = ['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail'];

/** The agent whose number and carrier account carry the call (its credentials sign and place the carrier's requests). */
export function carrierAgentId(call: Pick<CallRow, 'agent_id' | 'number_agent_id'>): string {
  return call.number_agent_id ?? call.agent_id;
}

export function isTerminal(status: CallStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export interface CallRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  batch_id: string | null;
  /** A batch's call: the recipient and the attempt (1-based) it is; unique together (migration 019). */
  batch_recipient_id: string | null;
  attempt: number | null;
  direction: 'outbound' | 'inbound';
  provider: 'provider_a' | 'provider_b';
  from_number: string;
  to_number: string;
  status: CallStatus;
  call_sid: string | null;
  first_message: string | null;
  first_message_delivered: boolean;
  variables: Variables;
  webhook_url: string | null;
  instruction: string;
  /** The agent's `analysis` setting as the call started with it. */
  analysis: AnalysisSetting | null;
  /** Its structured results, written with the terminal status. */
  analysis_results: AnalysisResults | null;
  /** An inbound call handed to `agent_id` by its setup: the agent whose number and carrier account carry it. */
  number_agent_id: string | null;
  /** What came of an inbound call's per-caller setup (InboundSetupOutcome in the contract). */
  inbound_setup: InboundSetupOutcome | null;
  /** The recording setting in force when the call was created (the call's, its batch's or its agent's). */
  recording_enabled: boolean;
  transcript: TranscriptTurn[];
  transcript_truncated: boolean;
  interruption_count: number;
  latencies_ms: number[];
  tool_calls: ToolCallRecord[];
  summary: string | null;
  sentiment: 'positive' | 'neutral' | 'negative' | null;
  goal_met: boolean | null;
  needs_review: boolean | null;
  unanswered_questions: string[];
  latency_avg_ms: number | null;
  duration: number;
  answered_by: AnsweredBy | null;
  end_reason: EndReason | null;
  end_reason_hint: EndReason | null;
  carrier_outcome: CarrierOutcome | null;
  carrier_seq: number | null;
  stream_token_hash: string | null;
  bridge_instance: string | null;
  cost_cents: number;
  created_at: Date;
  dial_attempted_at: Date | null;
  answered_at: Date | null;
  media_started_at: Date | null;
  media_ended_at: Date | null;
  hangup_requested_at: Date | null;
  ended_at: Date | null;
  deadline_at: Date;
  /** The last moment the instance running the call's media was known alive (its heartbeat). */
  alive_at: Date | null;
  finalising_at: Date | null;
  updated_at: Date;
}

export type NewCall = Partial<Pick<CallRow, 'batch_recipient_id' | 'attempt' | 'number_agent_id' | 'inbound_setup'>> &
  Pick<
    CallRow,
    | 'id'
    | 'workspace_id'
    | 'agent_id'
    | 'batch_id'
    | 'direction'
    | 'provider'
    | 'from_number'
    | 'to_number'
    | 'status'
    | 'call_sid'
    | 'first_message'
    | 'variables'
    | 'webhook_url'
    | 'instruction'
    | 'analysis'
    | 'recording_enabled'
    | 'stream_token_hash'
    | 'deadline_at'
  >;

/** The live facts of a conversation as the bridge saves them. */
export interface CallProgress {
  transcript: TranscriptTurn[];
  transcript_truncated: boolean;
  interruption_count: number;
  latencies_ms: number[];
  tool_calls: ToolCallRecord[];
  first_message_delivered: boolean;
}

export interface CallFilters {
  agent_id?: string;
  batch_id?: string;
  status?: CallStatus;
  direction?: 'outbound' | 'inbound';
  created_after?: string;
  created_before?: string;
}

const JSON_COLUMNS = [
  'variables',
  'transcript',
  'latencies_ms',
  'tool_calls',
  'unanswered_questions',
  'analysis',
  'analysis_results',
  'inbound_setup',
] as const;

/** jsonb columns get JSON text (pg would send a JS array as a PostgreSQL array). */
function encode<T extends Record<string, unknown>>(values: T): Record<string, unknown> {
  const out: Record<string, unknown> = { ...values };
  for (const c of JSON_COLUMNS) if (c in out && out[c] !== undefined) out[c] = out[c] === null ? null : JSON.stringify(out[c]);
  return out;
}

/** A call whose status moved (`previous` null: the call was just created). */
export interface StatusMove {
  row: CallRow;
  previous: CallStatus | null;
}

/** Told of status moves in the transaction that makes them (src/calls/live-events.ts: live events and webhooks). */
export type StatusObserver = (moves: StatusMove[], trx: Knex.Transaction) => Promise<void>;

export class CallStore {
  /** Set by the assembly; every write that moves a call's status runs it in its transaction. */
  statusObserver: StatusObserver | null = null;

  constructor(private readonly db: Knex) {}

  /**
   * Runs an update of one call that may move its status (`build` gives the update without its
   * returning). With an observer, in a transaction, and the update itself reads (and locks) the status
   * before, in the same statement (a locked `from` of the same row: the old values the update replaced),
   * so the observer learns of exactly the moves that happened without a read of its own.
   */
  private async moving(id: string, trx: Knex.Transaction | undefined, build: (db: Knex | Knex.Transaction) => Knex.QueryBuilder): Promise<CallRow | undefined> {
    const observer = this.statusObserver;
    if (!observer) {
      const [row] = await build(trx ?? this.db).returning('*');
      return row as CallRow | undefined;
    }
    const run = async (t: Knex.Transaction) => {
      const [found] = (await build(t)
        .updateFrom(t.raw('(select status as previous_status from calls where id = ? for update) as before', [id]))
        .returning('*')) as Array<CallRow & { previous_status?: CallStatus }>;
      if (!found) return undefined;
      const { previous_status: previous, ...row } = found;
      if (previous && row.status !== previous) await observer([{ row, previous }], t);
      return row as CallRow;
    };
    return trx ? run(trx) : this.db.transaction(run);
  }

  private async created(rows: CallRow[], trx: Knex.Transaction | undefined): Promise<void> {
    const observer = this.statusObserver;
    if (!observer || rows.length === 0) return;
    const moves = rows.map((row) => ({ row, previous: null }));
    if (trx) await observer(moves, trx);
    else await this.db.transaction((t) => observer(moves, t));
  }

  get knex(): Knex {
    return this.db;
  }

  async insert(call: NewCall, trx?: Knex.Transaction): Promise<CallRow> {
    if (this.statusObserver && !trx) return this.db.transaction((t) => this.insert(call, t));
    const [row] = await (trx ?? this.db)('calls').insert(encode(call)).returning('*');
    await this.created([row], trx);
    return row;
  }

  /** Several calls in one statement (a batch's dispatch round). */
  async insertMany(calls: NewCall[], trx: Knex.Transaction): Promise<CallRow[]> {
    if (!calls.length) return [];
    const rows: CallRow[] = await trx('calls').insert(calls.map(encode)).returning('*');
    await this.created(rows, trx);
    return rows;
  }

  /** By id alone, so callers can tell "another workspace's" (403) from "none" (404). */
  get(id: string, trx?: Knex.Transaction): Promise<CallRow | undefined> {
    return (trx ?? this.db)('calls').where({ id }).first();
  }

  /**
   * A media stream's claim: takes the call's single-use stream token (a live call of `provider` whose
   * carrier id, if known, is `callSid`, and whose media has not started) and marks the call answered
   * with its media on `instanceId`. One stream per call: once a stream has claimed it, no other can,
   * whatever token it holds (the database decides, so two instances cannot both take it).
   */
  async claimStream(input: {
    callId: string;
    provider: CallRow['provider'];
    tokenHash: string;
    callSid: string;
    instanceId: string;
    now: Date;
    deadlineMs: number;
  }): Promise<CallRow | undefined> {
    return this.moving(input.callId, undefined, (db) =>
      db('calls')
        .where({ id: input.callId, provider: input.provider, stream_token_hash: input.tokenHash })
        .whereNull('media_started_at')
        .whereIn('status', ['initiated', 'ringing', 'in_progress'])
        .where((q) => q.whereNull('call_sid').orWhere('call_sid', input.callSid))
        .update({
          stream_token_hash: null,
          call_sid: input.callSid,
          status: 'in_progress',
          answered_at: this.db.raw('coalesce(answered_at, ?)', [input.now]),
          media_started_at: input.now,
          bridge_instance: input.instanceId,
          deadline_at: this.db.raw(`now() + ? * interval '1 millisecond'`, [input.deadlineMs]),
          alive_at: this.db.fn.now(),
          updated_at: this.db.fn.now(),
        }),
    );
  }

  /**
   * Gives a live call a new stream token (the carrier asks for our TwiML), only while no media stream
   * has started: once one has, no token is ever given again. Undefined when the call is not live or
   * already has its stream.
   */
  async offerStream(id: string, values: Partial<CallRow>, from: readonly CallStatus[] = LIVE_STATUSES): Promise<CallRow | undefined> {
    const write = (db: Knex | Knex.Transaction) =>
      db('calls')
        .where({ id })
        .whereIn('status', from as CallStatus[])
        .whereNull('media_started_at')
        .update({ ...encode(values), updated_at: this.db.fn.now() });
    if (values.status !== undefined) return this.moving(id, undefined, write);
    const [row] = await write(this.db).returning('*');
    return row as CallRow | undefined;
  }

  /**
   * Records the call's answering-machine result if it has none yet (the first result wins: a later
   * or replayed one cannot switch a person's call into voicemail). Undefined when one was already
   * recorded or the call is over.
   */
  async recordAnsweredBy(id: string, answeredBy: AnsweredBy): Promise<CallRow | undefined> {
    const [row] = await this.db('calls')
      .where({ id })
      .whereIn('status', LIVE_STATUSES as CallStatus[])
      .whereNull('answered_by')
      .update({ answered_by: answeredBy, updated_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  findByCallSid(provider: CallRow['provider'], callSid: string): Promise<CallRow | undefined> {
    return this.db('calls').where({ provider, call_sid: callSid }).first();
  }

  list(workspaceId: string, filters: CallFilters, params: PageParams): Promise<Page<CallRow>> {
    const q = this.db('calls').where({ workspace_id: workspaceId }).select('*');
    for (const key of ['agent_id', 'batch_id', 'status', 'direction'] as const) if (filters[key] !== undefined) q.where(key, filters[key]);
    if (filters.created_after) q.where('created_at', '>=', new Date(filters.created_after));
    if (filters.created_before) q.where('created_at', '<', new Date(filters.created_before));
    return paginate<CallRow, CallRow>(q, params, (r) => r);
  }

  /**
   * Updates the call if it is in one of `from` (any live state when omitted) and returns it, else
   * undefined: the guard that keeps a terminal call unchanged and makes racing writers take turns.
   */
  async update(id: string, values: Partial<CallRow>, from: readonly CallStatus[] = LIVE_STATUSES, trx?: Knex.Transaction): Promise<CallRow | undefined> {
    const write = (db: Knex | Knex.Transaction) =>
      db('calls')
        .where({ id })
        .whereIn('status', from as CallStatus[])
        .update({ ...encode(values), updated_at: this.db.fn.now() });
    if (values.status !== undefined) return this.moving(id, trx, write);
    const [row] = await write(trx ?? this.db).returning('*');
    return row as CallRow | undefined;
  }

  /**
   * The dial job's claim: only a queued call never attempted before, and not asked to hang up, is dialed
   * (at most once). One atomic update, so a hang-up either lands first (no dial) or sees the claim.
   */
  async claimDial(id: string, streamTokenHash: string): Promise<CallRow | undefined> {
    const [row] = await this.db('calls')
      .where({ id, status: 'queued' })
      .whereNull('dial_attempted_at')
      .whereNull('hangup_requested_at')
      .update({ dial_attempted_at: this.db.fn.now(), stream_token_hash: streamTokenHash, updated_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  /**
   * Claims the finalisation of a live call: one claimant at a time; a claim older than `staleMs` (its
   * instance died during analysis) may be taken over.
   */
  async claimFinalise(id: string, staleMs: number): Promise<CallRow | undefined> {
    const [row] = await this.db('calls')
      .where({ id })
      .whereIn('status', LIVE_STATUSES as CallStatus[])
      .where((q) => q.whereNull('finalising_at').orWhere('finalising_at', '<', this.db.raw(`now() - ? * interval '1 millisecond'`, [staleMs])))
      .update({ finalising_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  /** Writes the conversation so far (the bridge, as it goes). */
  async saveProgress(id: string, progress: CallProgress): Promise<void> {
    await this.db('calls')
      .where({ id })
      .whereIn('status', LIVE_STATUSES as CallStatus[])
      .update({ ...encode(progress as unknown as Record<string, unknown>), updated_at: this.db.fn.now() });
  }

  /** Heartbeat: this instance is alive for the live calls it runs, whose deadline moves to now() + `ms` (database clock). */
  async renewDeadlines(ids: string[], ms: number): Promise<void> {
    if (!ids.length) return;
    await this.db('calls')
      .whereIn('id', ids)
      .whereIn('status', LIVE_STATUSES as CallStatus[])
      .update({ deadline_at: this.db.raw(`now() + ? * interval '1 millisecond'`, [ms]), alive_at: this.db.fn.now() });
  }

  /** Records a carrier webhook id; false when it was seen before (a redelivery). */
  async firstSighting(provider: string, eventId: string): Promise<boolean> {
    const rows = await this.db('carrier_events').insert({ provider, event_id: eventId }).onConflict(['provider', 'event_id']).ignore().returning('event_id');
    return rows.length > 0;
  }

  async pruneCarrierEvents(before: Date): Promise<void> {
    await this.db('carrier_events').where('received_at', '<', before).delete();
  }
}
