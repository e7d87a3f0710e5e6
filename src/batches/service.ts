/**
 * The rules of batches, without Koa: creating one from JSON or from a CSV file (every check before
 * anything is stored; the batch, its recipients and its first wake-up written in one transaction),
 * reading and listing, and the actions on a running batch (cancel, pause, resume, retry), each under
 * the batch row's lock so it cannot interleave with a dispatch round.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ApiError, conflict, notFound, otherWorkspace, tooManyRequests, type ValidationIssue, code422 } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { CallService } from '../calls/service.js';
import { CallTexts, overflowParam } from '../calls/filled-text.js';
import type { RuntimeAgent } from '../agents/service.js';
import { missingMessage, overflowMessage } from '../contract/placeholders.js';
import type { DestinationService } from '../destinations/service.js';
import type { DoNotCallService } from '../do-not-call/service.js';
import { isValidTimeZone, windowProblems } from './calling-window.js';
import { numbersOf, screenRecipients, type RowProblem } from './recipients.js';
import { MAX_FILE_PROBLEMS, parseRecipientsCsv } from './csv.js';
import { batchInputFromCsvForm, type CsvForm } from './csv-form.js';
import type { BatchInput } from './batch-input.js';
import { toBatch, toDetail, toSummary, type Batch, type BatchDetail, type BatchSummary } from './records.js';
import type { BatchEngine } from './engine.js';
import { TERMINAL_BATCH, type BatchFilters, type BatchRow, type BatchStore, type NewRecipient, type RetryOutcome } from './store.js';
import { applySettings, effectiveSettings } from '../voice/conversation-settings.js';
import { checkRowOverrides, type OverrideSchemaCheck } from './csv-conversation.js';

export const DEFAULT_CONCURRENCY = 10;
export const DEFAULT_RETRY = { max_attempts: 3, delay_seconds: 900, retry_on: [] as RetryOutcome[] };
export const MAX_SCHEDULE_AHEAD_MS = 30 * 24 * 3600 * 1000;

/** Per-workspace caps (configuration): batches not yet over, and recipients waiting across them. */
export interface WorkspaceCaps {
  maxOpenBatches: number;
  maxWaitingRecipients: number;
}

export function batchNotFound(batchId: string) {
  return notFound('batch_not_found', `No batch ${batchId.slice(0, 64)}.`, 'batch_id');
}

const issue = (loc: string[], msg: string, type: string, input?: unknown): ValidationIssue => ({ loc, msg, type, ...(input !== undefined ? { input } : {}) });

function refuse(issues: ValidationIssue[]): ApiError<422> {
  const first = issues[0];
  return new ApiError(422, 'invalid_request_error', code422(first.type), first.msg, { param: first.loc.slice(1).join('.') || null, issues });
}

export class BatchService {
  constructor(
    private readonly store: BatchStore,
    private readonly calls: CallService,
    private readonly engine: BatchEngine,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly destinations: DestinationService,
    private readonly caps: WorkspaceCaps,
    private readonly doNotCall: Pick<DoNotCallService, 'listedAmong'>,
  ) {}

  /** The workspace's caps, counted under its creation lock in the creating transaction. */
  private async checkCaps(trx: Knex.Transaction, workspaceId: string, adding: number): Promise<void> {
    await this.store.lockWorkspaceCreations(trx, workspaceId);
    const load = await this.store.openLoad(trx, workspaceId);
    this.judgeCaps({ batches: load.batches + 1, waiting: load.waiting + adding }, adding);
  }

  /** 429 when the workspace's open batches and waiting recipients, counting the `adding` a request brings, pass its caps. */
  private judgeCaps(after: { batches: number; waiting: number }, adding: number): void {
    if (after.batches > this.caps.maxOpenBatches) {
      throw tooManyRequests(
        60,
        `The workspace has ${after.batches - 1} batches that are not over, as many as it may; retry when one ends.`,
        'batch_limit_reached',
      );
    }
    if (after.waiting > this.caps.maxWaitingRecipients) {
      throw new ApiError(
        429,
        'rate_limit_error',
        'pending_recipient_limit_reached',
        `The workspace has ${after.waiting - adding} recipients waiting in its batches; ${adding} more would pass its cap of ${this.caps.maxWaitingRecipients}.`,
        { param: 'recipients', headers: { 'Retry-After': '60' } },
      );
    }
  }

  /** The rules a schema cannot say: the schedule's horizon, the calling window, recipients' time zones. */
  private settingIssues(input: BatchInput, now: Date): ValidationIssue[] {
    const issues: ValidationIssue[] = [];
    if (input.scheduled_at !== undefined && new Date(input.scheduled_at).getTime() - now.getTime() > MAX_SCHEDULE_AHEAD_MS) {
      issues.push(issue(['body', 'scheduled_at'], 'scheduled_at may be at most 30 days ahead.', 'scheduled_too_far', input.scheduled_at));
    }
    if (input.calling_window) {
      for (const p of windowProblems(input.calling_window)) {
        issues.push(issue(['body', 'calling_window', p.field], p.message, p.field === 'timezone' ? 'invalid_timezone' : 'invalid_calling_window'));
      }
    }
    for (const r of input.recipients) {
      if (r.timezone !== undefined && !isValidTimeZone(r.timezone)) {
        issues.push(
          issue(
            ['body', 'recipients', String(r.index), 'timezone'],
            `Recipient ${r.index}: '${r.timezone.slice(0, 64)}' is not an IANA time zone.`,
            'invalid_timezone',
            r.timezone,
          ),
        );
      }
    }
    return issues;
  }

  /**
   * 422 listing the recipients (the first 50) that leave a placeholder of the agent's texts without a
   * value (`variable_missing`, checked first), or whose variables or first message would fill one past
   * its cap (`filled_text_too_long`): the variable, or the CSV row and column.
   */
  private checkFills(agent: RuntimeAgent, recipients: BatchInput['recipients']): void {
    const texts = new CallTexts(agent);
    const missing = this.fillIssues(recipients, (r) => {
      const m = texts.missing(r.variables, r.first_message);
      return m && { variable: m.variable, message: missingMessage(m), code: 'variable_missing' };
    });
    const issues = missing.length
      ? missing
      : this.fillIssues(recipients, (r) => {
          const o = texts.overflow(r.variables, r.first_message);
          if (!o) return null;
          const blamed = overflowParam(o, r.variables).split('.');
          return { blamed, variable: blamed.at(-1)!, message: overflowMessage(o), code: 'filled_text_too_long' };
        });
    if (!issues.length) return;
    const csv = issues[0].loc[0] === 'file';
    throw new ApiError(422, 'invalid_request_error', issues[0].type as 'variable_missing' | 'filled_text_too_long', issues[0].msg, {
      param: csv ? 'file' : issues[0].loc.slice(1).join('.'),
      issues,
    });
  }

  /** One issue per recipient `problem` finds something wrong with (the first 50); `blamed` defaults to the variable. */
  private fillIssues(
    recipients: BatchInput['recipients'],
    problem: (r: BatchInput['recipients'][number]) => { blamed?: string[]; variable: string; message: string; code: string } | null,
  ): ValidationIssue[] {
    const issues: ValidationIssue[] = [];
    for (const r of recipients) {
      const p = problem(r);
      if (!p) continue;
      const blamed = p.blamed ?? ['variables', p.variable];
      const onAgent = blamed[0] === 'agent_id';
      issues.push(
        r.row === undefined
          ? issue(onAgent ? ['body', 'agent_id'] : ['body', 'recipients', String(r.index), ...blamed], `Recipient ${r.index}: ${p.message}`, p.code)
          : issue(['file', String(r.row), onAgent ? 'row' : p.variable], `Row ${r.row}: ${p.message}`, p.code),
      );
      if (issues.length === MAX_FILE_PROBLEMS) break;
    }
    return issues;
  }

  /**
   * POST /api/v1/batches/csv, once its form is validated: the file is refused as a whole (422 with each
   * problem) or its unreadable rows are skipped with their reasons beside the rest.
   */
  async createFromCsv(workspaceId: string, form: CsvForm, file: Buffer, checkOverride: OverrideSchemaCheck): Promise<Batch> {
    const parsed = await parseRecipientsCsv(file);
    if (!parsed.ok) {
      const issues = parsed.problems.slice(0, MAX_FILE_PROBLEMS).map((p) => issue(['file', ...(p.column ? [p.column] : [])], p.message, p.type));
      throw new ApiError(422, 'invalid_request_error', code422(parsed.problems[0].type), parsed.problems[0].message, { param: 'file', issues });
    }
    checkRowOverrides(parsed.recipients, checkOverride);
    return this.create(workspaceId, batchInputFromCsvForm(form, parsed.recipients), parsed.problems);
  }

  /** POST /api/v1/batches and /batches/csv: 201 with the batch, or a refusal with nothing stored. */
  async create(workspaceId: string, input: BatchInput, rowProblems: RowProblem[] = []): Promise<Batch> {
    const now = this.clock.now();
    const issues = this.settingIssues(input, now);
    if (issues.length) throw refuse(issues);
    const plan = await this.calls.plan(workspaceId, { agent_id: input.agent_id, agent_version: input.agent_version, provider: input.provider });
    effectiveSettings(plan.agent.conversation, input.conversation);
    // A CSV row's override was checked as the file was read (checkRowOverrides).
    for (const r of input.recipients) if (r.row === undefined) applySettings(null, r.conversation, `recipients.${r.index}.conversation`);
    this.checkFills(plan.agent, input.recipients);
    await this.calls.checkWebhookUrl(input.webhook_url);
    await this.calls.checkBilling(workspaceId);
    const screen = await this.destinations.screenMany(workspaceId, numbersOf(input.recipients));
    // Skipped before the caps count the batch's recipients; checked again as each is dialed (engine.ts).
    const listed = await this.doNotCall.listedAmong(workspaceId, [...new Set(numbersOf(input.recipients))]);
    const { accepted, skipped } = screenRecipients(input.recipients, rowProblems, screen, listed);
    if (!accepted.length) {
      // The list-shaped 422 carries at most 50 problems (ValidationErrorList): the summary and the first 49.
      const detail = skipped
        .slice(0, 49)
        .map((s) =>
          issue(
            s.row === null ? ['body', 'recipients', String(s.index), 'to_number'] : ['file', String(s.row), s.column ?? 'row'],
            s.message,
            s.reason,
            s.to_number ?? undefined,
          ),
        );
      throw new ApiError(422, 'invalid_request_error', 'no_valid_recipients', 'No recipient can be called: every one was skipped (see detail).', {
        param: 'recipients',
        issues: [
          issue(
            ['body', 'recipients'],
            `No recipient can be called: every one was skipped${skipped.length > detail.length ? ` (the first ${detail.length} of ${skipped.length} are listed)` : ''}.`,
            'no_valid_recipients',
          ),
          ...detail,
        ],
      });
    }
    const scheduledAt = input.scheduled_at !== undefined && new Date(input.scheduled_at) > now ? new Date(input.scheduled_at) : now;
    const later = scheduledAt > now;
    const batchId = newId('batch');
    const recipients: NewRecipient[] = accepted.map((r, position) => ({
      id: newId('batchRecipient'),
      position,
      to_number: r.number,
      variables: r.variables ?? {},
      first_message: r.first_message ?? null,
      timezone: r.timezone ?? null,
      conversation: r.conversation ?? null,
      status: later ? 'scheduled' : 'pending',
      next_attempt_at: scheduledAt,
    }));
    const retry = { ...DEFAULT_RETRY, ...input.retry_policy };
    const row = await this.store.knex.transaction(async (trx) => {
      await this.checkCaps(trx, workspaceId, recipients.length);
      const created = await this.store.insert(
        {
          id: batchId,
          workspace_id: workspaceId,
          agent_id: plan.agent.id,
          agent_version: plan.agent.version,
          name: input.name,
          provider: plan.provider,
          status: later ? 'scheduled' : 'queued',
          total: recipients.length,
          skipped,
          webhook_url: input.webhook_url ?? null,
          recording_enabled: input.recording?.enabled ?? null,
          conversation: input.conversation ?? null,
          concurrency: input.concurrency ?? DEFAULT_CONCURRENCY,
          retry_max_attempts: retry.max_attempts,
          retry_delay_s: retry.delay_seconds,
          retry_on: [...new Set(retry.retry_on)],
          calling_window: input.calling_window ?? null,
          scheduled_at: scheduledAt,
          created_at: now,
        },
        recipients,
        trx,
      );
      await this.engine.wake(batchId, trx);
      return created;
    });
    this.log.info({ batchId, workspaceId, total: row.total, skipped: skipped.length, scheduledAt }, 'batch created');
    return toBatch(row);
  }

  /** The batch row of this workspace: 404 when there is none, 403 when it is another workspace's. */
  async owned(workspaceId: string, batchId: string): Promise<BatchRow> {
    const row = await this.store.get(batchId);
    if (!row) throw batchNotFound(batchId);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('batch');
    return row;
  }

  async get(workspaceId: string, batchId: string): Promise<BatchDetail> {
    const row = await this.owned(workspaceId, batchId);
    const [counts, recipients] = await Promise.all([this.store.counts([row.id]), this.store.recipients(row.id)]);
    return toDetail(row, counts.get(row.id)!, recipients);
  }

  async list(workspaceId: string, query: BatchFilters & PageParams): Promise<Page<BatchSummary>> {
    const page = await this.store.list(workspaceId, query, query);
    const counts = await this.store.counts(page.data.map((r) => r.id));
    return { ...page, data: page.data.map((r) => toSummary(r, counts.get(r.id)!)) };
  }

  /** Runs `change` on the locked batch of this workspace, then answers the detail. */
  private async act(workspaceId: string, batchId: string, change: (trx: Knex.Transaction, batch: BatchRow) => Promise<void>): Promise<BatchDetail> {
    await this.owned(workspaceId, batchId);
    await this.store.knex.transaction(async (trx) => {
      const batch = await this.store.lock(trx, batchId);
      if (!batch) throw batchNotFound(batchId);
      await change(trx, batch);
    });
    return this.get(workspaceId, batchId);
  }

  private static alreadyTerminal(batch: BatchRow): ApiError<409> {
    return conflict('batch_already_terminal', `The batch is already ${batch.status}.`);
  }

  cancel(workspaceId: string, batchId: string): Promise<BatchDetail> {
    return this.act(workspaceId, batchId, async (trx, batch) => {
      if (TERMINAL_BATCH.includes(batch.status)) throw BatchService.alreadyTerminal(batch);
      await this.store.closeWaiting(trx, batchId, 'canceled', null);
      const canceled = await this.store.update(trx, batchId, { status: 'canceled' });
      await this.engine.settle(trx, canceled);
      this.log.info({ batchId }, 'batch canceled');
    });
  }

  pause(workspaceId: string, batchId: string): Promise<BatchDetail> {
    return this.act(workspaceId, batchId, async (trx, batch) => {
      if (TERMINAL_BATCH.includes(batch.status)) throw BatchService.alreadyTerminal(batch);
      if (batch.status !== 'paused') await this.store.update(trx, batchId, { status: 'paused' });
    });
  }

  resume(workspaceId: string, batchId: string): Promise<BatchDetail> {
    return this.act(workspaceId, batchId, async (trx, batch) => {
      if (TERMINAL_BATCH.includes(batch.status)) throw BatchService.alreadyTerminal(batch);
      if (batch.status !== 'paused') return;
      const attempted = await this.store.attempted(trx, batchId);
      const status = batch.scheduled_at > this.clock.now() ? 'scheduled' : attempted ? 'in_progress' : 'queued';
      await this.store.update(trx, batchId, { status });
      await this.engine.wake(batchId, trx);
    });
  }

  async retry(workspaceId: string, batchId: string): Promise<BatchDetail> {
    await this.owned(workspaceId, batchId);
    await this.calls.checkBilling(workspaceId);
    return this.act(workspaceId, batchId, async (trx, batch) => {
      if (!TERMINAL_BATCH.includes(batch.status) || !batch.completed_at) {
        throw conflict(
          'batch_not_terminal',
          batch.completed_at
            ? `The batch is ${batch.status}; only a finished batch can be retried.`
            : 'A call of the batch is still live; retry once it has ended.',
        );
      }
      await this.store.lockWorkspaceCreations(trx, workspaceId);
      const reopened = await this.store.reopen(trx, batchId, this.clock.now());
      if (!reopened) throw conflict('nothing_to_retry', 'No recipient of this batch is failed, no_answer, busy or voicemail.');
      await this.store.update(trx, batchId, { status: 'queued', completed_at: null, failure_reason: null });
      // Counted with the batch reopened; a refusal rolls the reopening back.
      this.judgeCaps(await this.store.openLoad(trx, workspaceId), reopened);
      await this.engine.wake(batchId, trx);
      this.log.info({ batchId, reopened }, 'batch retried');
    });
  }

  /** Agents with a batch that is not over cannot be deleted (AgentService delete guard). */
  async guardAgentDelete(workspaceId: string, agentId: string): Promise<void> {
    if (await this.store.hasActive(workspaceId, agentId)) {
      throw conflict('agent_has_active_batches', 'The agent has a scheduled or running batch; cancel it before deleting the agent.');
    }
  }
}
