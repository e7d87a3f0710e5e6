/**
 * The workspace's do-not-call list, without Koa: adding (idempotent), removing, listing and importing
 * numbers, and the checks the calls and batches domains run: a call to a listed number is refused
 * before anything is stored or reserved, and a batch skips its listed recipients when it is created
 * and again as each is taken to be dialed (in the dispatch round's own transaction).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import { ApiError, code422, notFound, unprocessable, type ValidationIssue } from '../errors/api-error.js';
import type { Page, PageParams } from '../lib/pagination.js';
import { listedNumber } from './numbers.js';
import { parseImportCsv } from './csv.js';
import type { DoNotCallStore, EntryRow } from './store.js';

export type DoNotCallEntry = components['schemas']['DoNotCallEntry'];
export type ImportResult = components['schemas']['DoNotCallImportResult'];

/** Skipped rows an import reports in full (the rest are counted). */
const MAX_REPORTED_ROWS = 1000;

export const toEntry = (row: EntryRow): DoNotCallEntry => ({
  entry_id: row.id,
  number: row.number,
  source: row.source,
  call_id: row.call_id,
  created_at: new Date(row.created_at).toISOString(),
});

/** The 422 of a call to a listed number (`param` names the field it came from). */
export function listedError(number: string, param: string): ApiError<422> {
  return unprocessable(
    'number_on_do_not_call_list',
    `${param}: ${number} is on the workspace's do-not-call list; remove it from the list (DELETE /api/v1/do-not-call/{entry_id}) to call it.`,
    param,
  );
}

export class DoNotCallService {
  constructor(
    private readonly store: DoNotCallStore,
    private readonly log: Logger,
    /** Numbers a workspace's list may hold (`DO_NOT_CALL_MAX_ENTRIES`); opt-outs are listed past it. */
    private readonly maxEntries: number,
  ) {}

  private static number(raw: string, param: string): string {
    const read = listedNumber(raw);
    if ('refusal' in read) throw unprocessable('invalid_phone_number', `${param}: ${read.refusal}`, param);
    return read.number;
  }

  /**
   * 422 `do_not_call_list_full` when the numbers `trx` added took the list past its cap. Read after the
   * insert: its trigger holds the workspace's count row until commit, so concurrent adds are judged in turn.
   */
  private async checkCap(trx: Knex.Transaction, workspaceId: string, added: number, param: string): Promise<void> {
    const entries = await this.store.count(workspaceId, trx);
    if (entries <= this.maxEntries) return;
    const cap = this.maxEntries.toLocaleString('en-US');
    throw unprocessable(
      'do_not_call_list_full',
      added === 1
        ? `The workspace's do-not-call list holds ${(entries - 1).toLocaleString('en-US')} numbers, as many as it may (${cap}); remove entries to list new ones.`
        : `This import's ${added.toLocaleString('en-US')} new numbers would take the workspace's do-not-call list to ${entries.toLocaleString('en-US')}, past its cap of ${cap}; nothing was listed.`,
      param,
    );
  }

  /** POST /api/v1/do-not-call: the entry, and whether this request created it. */
  async add(workspaceId: string, raw: string): Promise<{ entry: DoNotCallEntry; created: boolean }> {
    const number = DoNotCallService.number(raw, 'number');
    const { row, created } = await this.store.knex.transaction(async (trx) => {
      const added = await this.store.add(workspaceId, number, 'api', null, trx);
      if (added.created) await this.checkCap(trx, workspaceId, 1, 'number');
      return added;
    });
    if (created) this.log.info({ workspaceId, entryId: row.id, source: 'api' }, 'number added to the do-not-call list');
    return { entry: toEntry(row), created };
  }

  async remove(workspaceId: string, entryId: string): Promise<void> {
    if (!(await this.store.remove(workspaceId, entryId))) {
      throw notFound('do_not_call_entry_not_found', `No do-not-call entry ${entryId.slice(0, 64)}.`, 'entry_id');
    }
    this.log.info({ workspaceId, entryId }, 'number removed from the do-not-call list');
  }

  async list(workspaceId: string, query: PageParams & { number?: string }): Promise<Page<DoNotCallEntry>> {
    const number = query.number === undefined ? null : DoNotCallService.number(query.number, 'number');
    const page = await this.store.list(workspaceId, number, query);
    return { ...page, data: page.data.map(toEntry) };
  }

  /** POST /api/v1/do-not-call/csv: every readable row's number listed in one transaction, each row reported. */
  async importCsv(workspaceId: string, file: Buffer): Promise<ImportResult> {
    const parsed = await parseImportCsv(file);
    if (!parsed.ok) {
      const issue: ValidationIssue = { loc: ['file'], msg: parsed.problem.message, type: parsed.problem.type };
      throw new ApiError(422, 'invalid_request_error', code422(parsed.problem.type), parsed.problem.message, { param: 'file', issues: [issue] });
    }
    const distinct = [...new Set(parsed.numbers)];
    const added = distinct.length
      ? await this.store.knex.transaction(async (trx) => {
          const n = await this.store.addMany(trx, workspaceId, distinct, 'csv');
          if (n > 0) await this.checkCap(trx, workspaceId, n, 'file');
          return n;
        })
      : 0;
    this.log.info({ workspaceId, rows: parsed.rows, added, skipped: parsed.skipped.length }, 'do-not-call list imported');
    return {
      rows: parsed.rows,
      added,
      already_listed: parsed.numbers.length - added,
      skipped: { count: parsed.skipped.length, items: parsed.skipped.slice(0, MAX_REPORTED_ROWS) },
    };
  }

  /** 422 `number_on_do_not_call_list` when `number` (E.164) is listed. */
  async check(workspaceId: string, number: string, param: string): Promise<void> {
    if ((await this.store.listedAmong(workspaceId, [number])).size) throw listedError(number, param);
  }

  /** Which of `numbers` (E.164) are listed; with `db`, as that transaction sees the list. */
  listedAmong(workspaceId: string, numbers: string[], db?: Knex): Promise<Set<string>> {
    return this.store.listedAmong(workspaceId, numbers, db);
  }

  /** The person asked during call `callId` not to be called again: their number is listed (source `opt_out`). */
  async optOut(workspaceId: string, number: string, callId: string): Promise<DoNotCallEntry> {
    const { row, created } = await this.store.add(workspaceId, number, 'opt_out', callId);
    this.log.info({ workspaceId, callId, entryId: row.id, created }, 'person opted out: number on the do-not-call list');
    return toEntry(row);
  }
}
