/**
 * Phone calls in PostgreSQL. Every write that moves a call is guarded by the state it expects (so two
 * instances, or a callback racing the media stream, cannot both move it), and every read by id is
 * followed by a workspace check in the service.
 */
import type { Variables } from '../contract/placeholders.js';
import type { Knex } from 'knex';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';
import { writeProgress, type ProgressJson } from '../conversation/progress-saves.js';
import type { ToolCallRecord } from '../conversation/engine.js';
import type { TranscriptTurn } from '../voice/types.js';
import type { AnsweredBy, CarrierOutcome, Provider } from '../carriers/carrier.js';
import type { AnalysisResults, AnalysisSetting } from '../conversation/write-up.js';
import type { RedactionSetting } from '../redaction/setting.js';
import type { ConversationSettings } from '../voice/conversation-settings.js';
import type { components } from '../../generated/openapi.js';
import { listedEntryOf } from '../do-not-call/store.js';
import { CallTransferStore } from './transfers.js';

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
  | 'idle_timeout'
  | 'not_answered'
  | 'canceled'
  | 'carrier_error'
  | 'service_error'
  | 'model_refused'
  | 'not_allowed'
  | 'do_not_call'
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
  provider: Provider;
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
  /** The agent's analysis model as the call started; null: the service's `VOICE_ANALYSIS_MODEL`. */
  analysis_model: string | null;
  /** The agent's version the call runs (null: created before versions). */
  agent_version: number | null;
  /** Its structured results, written with the terminal status. */
  analysis_results: AnalysisResults | null;
  /** The agent's `redaction` setting as the call started with it. */
  redaction: RedactionSetting | null;
  /** The conversation settings the call runs with (the agent's with the call's or batch's override); null on calls older than them. */
  conversation: ConversationSettings | null;
  /** An inbound call handed to `agent_id` by its setup: the agent whose number and carrier account carry it. */
  number_agent_id: string | null;
  /** What came of an inbound call's per-caller setup (InboundSetupOutcome in the contract). */
  inbound_setup: InboundSetupOutcome | null;
  /** The recording setting in force when the call was created (the call's, its batch's or its agent's). */
  recording_enabled: boolean;
  /** When the person opted out and the agent's opt-out tool put their number on the do-not-call list. */
  opted_out_at: Date | null;
  /** When its content was erased (src/erasure): the row is then a tombstone. */
  erased_at: Date | null;
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

export type NewCall = Partial<
  Pick<CallRow, 'batch_recipient_id' | 'attempt' | 'number_agent_id' | 'inbound_setup' | 'redaction' | 'conversation' | 'analysis_model' | 'agent_version'>
> &
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
  'redaction',
  'conversation',
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

/** What a call is and whose it is: fixed when the call is created, never changed. */
export type CallIdentity = Pick<CallRow, 'id' | 'workspace_id' | 'agent_id' | 'agent_version' | 'number_agent_id' | 'provider'>;

/** Values to write to a call: each a value, or (not its status) an SQL expression over the row (e.g. `coalesce`). */
export type CallValues = { [K in keyof CallRow]?: K extends 'status' ? CallStatus : CallRow[K] | Knex.Raw };

/** Identities kept by a store (least recently created or read go first). */
const IDENTITIES_KEPT = 20_000;

/** Statement text and its bindings. */
export interface SqlPart {
  sql: string;
  bindings: Knex.RawBinding[];
}

/** Told of status moves (src/calls/live-events.ts: live events and webhooks). */
export interface StatusObserver {
  /** The moves, in the transaction that makes them. */
  moved(moves: StatusMove[], trx: Knex.Transaction): Promise<void>;
  /**
   * What a move of `call` into `to` writes when the move's own statement can write it (see
   * InlineWrite), given `predicted`, the row as the caller expects the move to leave it (its own copy
   * of the row, if any, with the values written). Null: the move is to be told to `moved` in a
   * transaction (`trx` when the caller has one: reads on its connection).
   */
  inline(call: CallKey, to: CallStatus, gate: string, predicted: Partial<CallValues>, trx?: Knex.Transaction): Promise<InlineWrite | null>;
}

/** What a status move writes in its own statement. */
export interface InlineWrite {
  /** Common table expressions stored only when the CTE named `gate` has a row (the move happened); null: the move writes nothing. */
  ctes: SqlPart | null;
  /**
   * Values the written rows assume of the moved row beyond what the move sets: they are written only
   * if the moved row has them; otherwise `moved` is told in the caller's transaction (there must be one).
   */
  assumes?: Partial<CallRow>;
  /** Runs once the statement wrote them. */
  written?: () => void;
}

/** A call as the writes that may move its status take it: its id, or its id and workspace (never changes) when the caller has its row. */
export type CallRef = string | CallKey;
export interface CallKey {
  id: string;
  workspace_id: string;
}

export class CallStore {
  /** Set by the assembly; every write that moves a call's status has it write what the move writes, with the move (see `moving`). */
  statusObserver: StatusObserver | null = null;

  /** Identities of calls created here (once committed) or read by `identity`: they never change. */
  private readonly identities = new Map<string, CallIdentity>();

  /** The calls' transfer attempts (`call_transfers`). */
  readonly transfers: CallTransferStore;

  constructor(private readonly db: Knex) {
    this.transfers = new CallTransferStore(db);
  }

  private remember(rows: CallIdentity[]): void {
    for (const { id, workspace_id, agent_id, agent_version, number_agent_id, provider } of rows) {
      this.identities.delete(id);
      this.identities.set(id, { id, workspace_id, agent_id, agent_version, number_agent_id, provider });
    }
    for (const id of this.identities.keys()) {
      if (this.identities.size <= IDENTITIES_KEPT) break;
      this.identities.delete(id);
    }
  }

  /** Remembers the identities of calls written in `trx` once it commits. */
  private rememberOnCommit(rows: CallIdentity[], trx: Knex.Transaction | undefined): void {
    if (!trx) this.remember(rows);
    else
      trx.executionPromise.then(
        () => this.remember(rows),
        () => undefined,
      );
  }

  /**
   * A call's identity (what a carrier's request is verified against): kept in memory once known,
   * since it never changes, so a carrier's reports about a call cost no read of it.
   */
  async identity(id: string): Promise<CallIdentity | undefined> {
    const kept = this.identities.get(id);
    if (kept) return kept;
    const row = (await this.db('calls').where({ id }).first('id', 'workspace_id', 'agent_id', 'agent_version', 'number_agent_id', 'provider')) as
      CallIdentity | undefined;
    if (row) this.remember([row]);
    return row;
  }

  /** `column`'s recorded value, else `value` (an expression for CallValues). */
  recordedOr(column: keyof CallRow, value: Knex.Value): Knex.Raw {
    return this.db.raw('coalesce(??, ?)', [column, value]);
  }

  /**
   * A write that records the carrier's sequence number is made only when it is newer than the one
   * recorded (a carrier's reports arrive out of order, and again).
   */
  private newerReport(q: Knex.QueryBuilder, values: CallValues): Knex.QueryBuilder {
    const seq = values.carrier_seq;
    return typeof seq === 'number' ? q.where((w) => w.whereNull('carrier_seq').orWhere('carrier_seq', '<', seq)) : q;
  }

  /**
   * Runs an update of one call that may move its status into `to` (`build` gives the update without
   * its returning). With an observer, and the update itself reads (and locks) the status before, in
   * the same statement (a locked `from` of the same row: the old values the update replaced), so the
   * observer learns of exactly the moves that happened without a read of its own. With the call's
   * workspace known (the caller passed its row), what the move writes is written by the same statement
   * when the observer can say so up front (InlineWrite: live events, no webhook): outside a
   * transaction one statement, no BEGIN/COMMIT; otherwise the observer runs in a transaction with the
   * update (the caller's, or one of its own).
   */
  private async moving(
    call: CallRef,
    values: CallValues & { status: CallStatus },
    trx: Knex.Transaction | undefined,
    build: (db: Knex | Knex.Transaction) => Knex.QueryBuilder,
  ): Promise<CallRow | undefined> {
    const to = values.status;
    const id = typeof call === 'string' ? call : call.id;
    const observer = this.statusObserver;
    if (!observer) {
      const [row] = await build(trx ?? this.db).returning('*');
      return row as CallRow | undefined;
    }
    const withBefore = (db: Knex | Knex.Transaction) =>
      build(db)
        .updateFrom(db.raw('(select status as previous_status from calls where id = ? for update) as before', [id]))
        .returning('*');
    type Found = CallRow & { previous_status?: CallStatus; notifications?: unknown; gated?: number };
    const strip = (found: Found | undefined) => {
      if (!found) return undefined;
      const { previous_status: previous, notifications: _n, gated, ...row } = found;
      return { row: row as CallRow, previous, gated: Number(gated ?? 0) > 0 };
    };
    let inline = typeof call !== 'string' ? await observer.inline(call, to, 'changed', { ...call, ...values }, trx) : null;
    // Rows that assume more than the move sets need a transaction to fall back in.
    if (inline?.assumes && !trx) inline = null;
    if (inline && !inline.ctes) {
      const [row] = await build(trx ?? this.db).returning('*');
      return row as CallRow | undefined;
    }
    if (inline?.ctes) {
      const db = trx ?? this.db;
      const move = withBefore(db).toSQL();
      const assumed = Object.entries(inline.assumes ?? {});
      const result = await db.raw(
        `with moved as (${move.sql}),
           changed as (select 1 from moved where status is distinct from previous_status${assumed.map(() => ' and moved.?? is not distinct from ?').join('')}),
           ${inline.ctes.sql}
         select moved.*, (select count(*) from notified) as notifications, (select count(*) from changed) as gated from moved`,
        [...(move.bindings as Knex.RawBinding[]), ...assumed.flat().map((v) => v as Knex.RawBinding), ...inline.ctes.bindings],
      );
      const moved = strip((result.rows as Found[])[0]);
      if (!moved) return undefined;
      const { row, previous, gated } = moved;
      if (gated) inline.written?.();
      else if (previous && row.status !== previous) await observer.moved([{ row, previous }], trx!);
      return row;
    }
    const run = async (t: Knex.Transaction) => {
      const [found] = (await withBefore(t)) as Array<CallRow & { previous_status?: CallStatus }>;
      const moved = strip(found);
      if (!moved) return undefined;
      const { row, previous } = moved;
      if (previous && row.status !== previous) await observer.moved([{ row, previous }], t);
      return row;
    };
    return trx ? run(trx) : this.db.transaction(run);
  }

  private async created(rows: CallRow[], trx: Knex.Transaction | undefined): Promise<void> {
    const observer = this.statusObserver;
    if (!observer || rows.length === 0) return;
    const moves = rows.map((row) => ({ row, previous: null }));
    if (trx) await observer.moved(moves, trx);
    else await this.db.transaction((t) => observer.moved(moves, t));
  }

  get knex(): Knex {
    return this.db;
  }

  async insert(call: NewCall, trx?: Knex.Transaction): Promise<CallRow> {
    if (this.statusObserver && !trx) return this.db.transaction((t) => this.insert(call, t));
    const [row] = await (trx ?? this.db)('calls').insert(encode(call)).returning('*');
    await this.created([row], trx);
    this.rememberOnCommit([row], trx);
    return row;
  }

  /** Several calls in one statement (a batch's dispatch round). */
  async insertMany(calls: NewCall[], trx: Knex.Transaction): Promise<CallRow[]> {
    if (!calls.length) return [];
    const rows: CallRow[] = await trx('calls').insert(calls.map(encode)).returning('*');
    await this.created(rows, trx);
    this.rememberOnCommit(rows, trx);
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
    return this.moving(input.callId, { status: 'in_progress' }, undefined, (db) =>
      db('calls')
        .where({ id: input.callId, provider: input.provider, stream_token_hash: input.tokenHash })
        .whereNull('media_started_at')
        // `queued` too: a stream given in the dial request (provider_b's) can come before the dial's answer
        // and any status report are recorded. Its token is made as the dial is claimed, so it proves the dial.
        .whereIn('status', ['queued', 'initiated', 'ringing', 'in_progress'])
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
  async offerStream(call: CallRef, values: Partial<CallRow>, from: readonly CallStatus[] = LIVE_STATUSES): Promise<CallRow | undefined> {
    const id = typeof call === 'string' ? call : call.id;
    const write = (db: Knex | Knex.Transaction) =>
      db('calls')
        .where({ id })
        .whereIn('status', from as CallStatus[])
        .whereNull('media_started_at')
        .update({ ...encode(values), updated_at: this.db.fn.now() });
    if (values.status !== undefined) return this.moving(call, { ...values, status: values.status }, undefined, write);
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
   * A caller holding the call's row passes it (its id and workspace) rather than its id: a status move
   * then costs one statement (see `moving`).
   */
  async update(call: CallRef, values: CallValues, from: readonly CallStatus[] = LIVE_STATUSES, trx?: Knex.Transaction): Promise<CallRow | undefined> {
    const id = typeof call === 'string' ? call : call.id;
    const write = (db: Knex | Knex.Transaction) =>
      this.newerReport(
        db('calls')
          .where({ id })
          .whereIn('status', from as CallStatus[]),
        values,
      ).update({ ...encode(values), updated_at: this.db.fn.now() });
    if (values.status !== undefined) return this.moving(call, { ...values, status: values.status }, trx, write);
    const [row] = await write(trx ?? this.db).returning('*');
    return row as CallRow | undefined;
  }

  /**
   * A forward move with facts that hold whatever the status: while the call is live, `always` is
   * written, and `move` (with its status) too when the call is in one of `from`; one statement.
   * Undefined when the call is not live.
   */
  async advance(call: CallKey, move: CallValues & { status: CallStatus }, from: readonly CallStatus[], always: CallValues): Promise<CallRow | undefined> {
    if (!Object.keys(always).length) return this.update(call, move, from);
    const movable = from.map(() => '?').join(', ');
    const moved = Object.fromEntries(
      Object.entries(encode(move)).map(([column, value]) => [
        column,
        this.db.raw(`case when status in (${movable}) then ? else ?? end`, [...from, value as Knex.Value, column]),
      ]),
    );
    return this.moving(call, { ...always, ...move }, undefined, (db) =>
      this.newerReport(
        db('calls')
          .where({ id: call.id })
          .whereIn('status', LIVE_STATUSES as CallStatus[]),
        always,
      ).update({
        ...encode(always),
        ...moved,
        updated_at: this.db.fn.now(),
      }),
    );
  }

  /**
   * The dial job's claim: only a queued call never attempted before, not asked to hang up, and whose
   * number is not on its workspace's do-not-call list as this statement sees it, is dialed (at most
   * once). One atomic update, so a hang-up either lands first (no dial) or sees the claim, and a number
   * listed after `POST /calls` checked it is never dialed (`markListed` then ends the call).
   */
  async claimDial(id: string, streamTokenHash: string): Promise<CallRow | undefined> {
    const [row] = await this.db('calls')
      .where({ id, status: 'queued' })
      .whereNull('dial_attempted_at')
      .whereNull('hangup_requested_at')
      .whereNotExists(this.listedNumber())
      .update({ dial_attempted_at: this.db.fn.now(), stream_token_hash: streamTokenHash, updated_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  /**
   * A queued call never dialed whose number is on its workspace's do-not-call list: marked not to be
   * dialed (its deadline job then finalises it too, should this instance die first).
   */
  async markListed(id: string): Promise<CallRow | undefined> {
    const [row] = await this.db('calls')
      .where({ id, status: 'queued' })
      .whereNull('dial_attempted_at')
      .whereNull('hangup_requested_at')
      .whereExists(this.listedNumber())
      .update({ hangup_requested_at: this.db.fn.now(), end_reason_hint: 'do_not_call', updated_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  private listedNumber(): Knex.QueryBuilder {
    return listedEntryOf(this.db, 'calls.workspace_id', 'calls.to_number');
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

  /**
   * The carrier's word that the call is over (`values`: its outcome, its end time if none is recorded
   * yet, facts of the report), in one statement with what follows from it: a call whose media stream
   * is live gets its deadline moved to `mediaDeadline` (its bridge ends it); any other is claimed for
   * finalisation as claimFinalise claims it. Undefined when the call is not live; `claimed` whether
   * this statement took the finalisation claim.
   */
  async carrierEnded(id: string, values: CallValues, mediaDeadline: Date, staleMs: number): Promise<{ row: CallRow; claimed: boolean } | undefined> {
    const mediaLive = 'media_started_at is not null and media_ended_at is null';
    const [found] = (await this.newerReport(
      this.db('calls')
        .where({ id })
        .whereIn('status', LIVE_STATUSES as CallStatus[]),
      values,
    )
      .update({
        ...encode(values),
        deadline_at: this.db.raw(`case when ${mediaLive} then ? else deadline_at end`, [mediaDeadline]),
        finalising_at: this.db.raw(
          `case when not (${mediaLive}) and (finalising_at is null or finalising_at < now() - ? * interval '1 millisecond') then now() else finalising_at end`,
          [staleMs],
        ),
        updated_at: this.db.fn.now(),
      })
      .updateFrom(this.db.raw('(select finalising_at as previous_finalising_at from calls where id = ? for update) as before', [id]))
      .returning('*')) as Array<CallRow & { previous_finalising_at: Date | null }>;
    if (!found) return undefined;
    const { previous_finalising_at: previous, ...row } = found;
    const claimed = row.finalising_at !== null && (previous === null || new Date(previous).getTime() !== new Date(row.finalising_at).getTime());
    return { row, claimed };
  }

  /** Writes live calls' conversations so far (ProgressSaves: every call that changed in a tick, in one statement). */
  async saveProgress(saves: ProgressJson[]): Promise<void> {
    await writeProgress(this.db, 'calls', saves, { where: this.db.raw('t.status::text = any(?::text[])', [[...LIVE_STATUSES]]), set: 'updated_at = now()' });
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
